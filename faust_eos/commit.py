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
   * :class:`TransactionFailed` (aborted, nothing visible): the outputs are
     put back, the table writes stay, and the offset is committed again at the
     next round;
   * :class:`ProducerFenced` or :class:`TransactionStuck`, or any other way
     the commit ends (cancelled, an unexpected error: its outcome is unknown):
     the partition is given up: its staged records, its table writes and its
     producer are dropped (the stores still hold the last committed state) and
     the group is asked to rebalance, so whoever claims it next starts from
     its last committed offset. Outputs and table writes are always dropped or
     kept together: a later commit must never carry writes without the outputs
     of the same events;
   * a partition given up while its transaction ran (revoked meanwhile) has
     nothing left to put back when that transaction fails.
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter
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

    def not_committed(self, records: Sequence[StagedRecord]) -> None: ...

    def drop(self, source: SourceTP) -> int: ...


class PartitionCommits:
    """Runs commit rounds and keeps the offsets failed ones leave behind, to retry."""

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
        #: offsets whose commit failed, committed again at the next round
        self.retries: dict[SourceTP, int] = {}
        #: how often each partition was given up: a commit that failed after its partition was given up
        #: meanwhile (revoked while the transaction ran) has nothing left to retry
        self._give_ups: Counter[SourceTP] = Counter()

    def settled(self) -> bool:
        """True if no commit waits for a retry."""
        return not self.retries

    async def run(self, offsets: Mapping[SourceTP, int]) -> dict[SourceTP, bool]:
        """Commit each partition up to its offset, and the retries; per partition, whether it committed."""
        wanted = dict(self.retries)
        for tp, offset in offsets.items():
            wanted[tp] = max(offset, wanted.get(tp, offset))
        outcomes = await asyncio.gather(*(self._commit_partition(tp, offset) for tp, offset in wanted.items()))
        return dict(zip(wanted, outcomes))

    async def _commit_partition(self, tp: SourceTP, offset: int) -> bool:
        # 1. Only the owner of the partition may commit it.
        transaction = self.transactions.get(tp)
        if transaction is None:
            self.give_up(tp, f"no producer for {tp.topic}[{tp.partition}]: partition not owned")
            return False
        # 2. Exactly the records caused by the events being committed; of a table key, the newest write.
        outputs = self.staging.take(tp, offset)
        table_records = self.tables.changelog_records({tp: offset})
        give_ups_before = self._give_ups[tp]
        # 3. One transaction: the records, then the offset.
        try:
            metadata = await transaction.commit(outputs + table_records, offset)
        # 4. One recovery per outcome.
        except TransactionFailed as exc:
            if self._give_ups[tp] != give_ups_before:
                return False  # given up meanwhile (revoked): its records and writes are dropped, nothing to retry
            log.warning("Commit of %s[%d] up to %d failed, will retry: %s", tp.topic, tp.partition, offset, exc)
            self.staging.put_back(tp, outputs)
            self.tables.not_committed(table_records)
            self.retries[tp] = offset
            return False
        except (ProducerFenced, TransactionStuck) as exc:
            if isinstance(exc, ProducerFenced):
                metrics.producers_fenced.inc()
            # Either another worker owns the partition now, or this producer is
            # unusable: give the partition up and let the group assign it again.
            self._drop_producer(tp, transaction, outputs, str(exc))
            return False
        except BaseException as exc:
            # Cancelled, or a failure of no known kind: the outcome is unknown, as when stuck. Putting the
            # records back while the table writes stay would let a later commit carry the writes without them.
            self._drop_producer(tp, transaction, outputs, f"commit ended by {exc!r}")
            raise
        self.retries.pop(tp, None)
        try:
            self.tables.committed(table_records, metadata[len(outputs):])
        except Exception as exc:
            raise LocalStateNotWritten(
                f"{tp.topic}[{tp.partition}] committed up to {offset}, but its table writes could not be stored "
                f"locally ({exc!r}): stopping; the next start restores them from the changelogs"
            ) from exc
        resolve(outputs, metadata)
        return True

    def _drop_producer(self, tp: SourceTP, transaction: Transaction, outputs: list[StagedRecord], why: str) -> None:
        """Give ``tp`` up with its producer (``outputs``: the records its commit took), and ask the group to
        assign it again."""
        log.warning("Giving up %s[%d]: %s", tp.topic, tp.partition, why)
        if self.transactions.get(tp) is transaction:  # else closed already, by a revocation meanwhile
            self.transactions.pop(tp).close()
        self.staging.put_back(tp, outputs)  # dropped with the rest, and counted
        self.give_up(tp, why)
        self._request_rejoin()

    def give_up(self, tp: SourceTP, why: str) -> None:
        """Drop what ``tp``'s events staged and wrote: this worker cannot commit it any more."""
        self._give_ups[tp] += 1
        dropped = len(self.staging.discard(tp)) + self.tables.drop(tp)
        if dropped:
            log.warning("Dropped %d uncommitted records of %s[%d]: %s", dropped, tp.topic, tp.partition, why)
        self.retries.pop(tp, None)
