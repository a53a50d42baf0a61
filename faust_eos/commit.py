"""A commit round: one transaction per input partition, and one recovery per outcome.

The transaction manager hands each round the offsets Faust wants committed
(the next offset to read, per input partition). Each partition then goes
through the same steps, numbered in :meth:`PartitionCommits._commit_partition`:

1. its producer: none means the partition is no longer owned, and it is given up;
2. the output records staged by its events below the offset are taken, and of
   each table key those events wrote, the newest write, as one changelog record;
3. one transaction produces them and commits the offset;
4. the outcome decides the one recovery action:

   * committed: the table writes go to the local stores with their new
     checkpoints, then the records' futures resolve; if a store cannot take
     them (its disk failed), :class:`LocalStateNotWritten` stops the worker,
     whose next start restores them from the changelog past the old checkpoint;
   * not committed, whatever the reason (:class:`TransactionFailed`: aborted;
     :class:`ProducerFenced`; :class:`TransactionStuck`; cancelled or an
     unexpected error, whose outcome is unknown): the partition is given up: its
     staged records, its table writes and its producer are dropped (the stores
     still hold the last committed state) and the group is asked to rebalance,
     so whoever claims it next starts from its last committed offset. Outputs
     and table writes are always dropped together: a later commit must never
     carry writes without the outputs of the same events.

A failed transaction is not retried on a new producer of the same id. Only an
assignment may claim a partition's transactional id: a worker paused through a
rebalance (a zombie) finds its transaction failed, not always fenced (a call
that timed out while it was paused), and claiming the id again then would fence
the partition's new owner and let the zombie commit its stale offsets.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Mapping, MutableMapping, Protocol, Sequence

from aiokafka.structs import RecordMetadata

from faust_eos import metrics
from faust_eos.errors import LocalStateNotWritten
from faust_eos.staging import SourceTP, StagedRecord, Staging, resolve
from faust_eos.transaction import ProducerFenced, TransactionFailed, TransactionStuck

log = logging.getLogger(__name__)


class Transaction(Protocol):
    """What a round needs of a partition's producer (:class:`faust_eos.transaction.PartitionTransaction`)."""

    async def commit(self, records: Sequence[StagedRecord], offset: int) -> list[RecordMetadata]: ...

    def close(self) -> None: ...


class Tables(Protocol):
    """Where the table writes a round carries come from and go (:class:`faust_eos.table_state.TableState`)."""

    def changelog_records(self, up_to: Mapping[SourceTP, int]) -> list[StagedRecord]: ...

    def committed(self, records: Sequence[StagedRecord], metadata: Sequence[RecordMetadata]) -> None: ...

    def drop(self, source: SourceTP) -> int: ...


class PartitionCommits:
    """Runs commit rounds, and gives up each partition whose commit did not go through."""

    def __init__(
        self,
        staging: Staging,
        transactions: MutableMapping[SourceTP, Transaction],
        tables: Tables,
        request_rejoin: Callable[[], None],
    ) -> None:
        self.staging = staging
        #: the producers of the partitions this worker claimed (shared with the manager, which claims them)
        self.transactions = transactions
        self.tables = tables
        self._request_rejoin = request_rejoin

    async def run(self, offsets: Mapping[SourceTP, int]) -> dict[SourceTP, bool]:
        """Commit each partition up to its offset; per partition, whether it committed."""
        outcomes = await asyncio.gather(*(self._commit_partition(tp, offset) for tp, offset in offsets.items()))
        return dict(zip(offsets, outcomes))

    async def _commit_partition(self, tp: SourceTP, offset: int) -> bool:
        # 1. Only the owner of the partition may commit it.
        transaction = self.transactions.get(tp)
        if transaction is None:
            self.give_up(tp, f"no producer for {tp.topic}[{tp.partition}]: partition not owned")
            return False
        # 2. Exactly the records caused by the events being committed; of a table key, the newest write.
        outputs = self.staging.take(tp, offset)
        table_records = self.tables.changelog_records({tp: offset})
        # 3. One transaction: the records, then the offset.
        try:
            metadata = await transaction.commit(outputs + table_records, offset)
        # 4. One recovery per outcome: committed, or given up.
        except (TransactionFailed, ProducerFenced, TransactionStuck) as exc:
            if isinstance(exc, ProducerFenced):
                metrics.producers_fenced.inc()
            self._drop_producer(tp, transaction, str(exc), taken=len(outputs))
            return False
        except BaseException as exc:
            self._drop_producer(tp, transaction, f"commit ended by {exc!r}", taken=len(outputs))
            raise
        try:
            self.tables.committed(table_records, metadata[len(outputs):])
        except Exception as exc:
            raise LocalStateNotWritten(
                f"{tp.topic}[{tp.partition}] committed up to {offset}, but its table writes could not be stored "
                f"locally ({exc!r}): stopping; the next start restores them from the changelogs"
            ) from exc
        resolve(outputs, metadata)
        return True

    def _drop_producer(self, tp: SourceTP, transaction: Transaction, why: str, *, taken: int) -> None:
        """Give ``tp`` up with its producer (``taken``: the outputs its commit took), and ask the group to
        assign it again."""
        log.warning("Giving up %s[%d]: %s", tp.topic, tp.partition, why)
        metrics.partitions_given_up.inc()
        if self.transactions.get(tp) is transaction:  # else closed already, by a revocation meanwhile
            self.transactions.pop(tp).close()
        self.give_up(tp, why, taken=taken)
        self._request_rejoin()

    def give_up(self, tp: SourceTP, why: str, *, taken: int = 0) -> None:
        """Drop what ``tp``'s events staged and wrote (and ``taken`` outputs already taken from staging): this
        worker cannot commit it any more."""
        dropped = taken + len(self.staging.discard(tp)) + self.tables.drop(tp)
        if dropped:
            log.warning("Dropped %d uncommitted records of %s[%d]: %s", dropped, tp.topic, tp.partition, why)
