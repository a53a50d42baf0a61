"""A commit round: one transaction for every input partition the worker owns, and one recovery per outcome.

The transaction manager hands each round the offsets Faust wants committed (the
next offset to read, per input partition). The round goes through the steps
numbered in :meth:`WorkerCommits.run`:

1. partitions this worker does not own in the current assignment are given up;
2. the committing member: the group's current generation and member id (none
   while the worker is out of the group: the broker would take offsets sent
   without a generation from anyone, so everything owned is given up);
3. of each owned partition, the output records staged by its events below its
   offset are taken, and of each table key those events wrote, the newest write,
   as one changelog record;
4. one transaction produces them all and commits every offset, with the member;
5. the outcome decides the one recovery action:

   * committed: the table writes go to the local stores with their new
     checkpoints, then the records' futures resolve; if a store cannot take
     them (its disk failed), :class:`LocalStateNotWritten` stops the worker,
     whose next start restores them from the changelog past the old checkpoint;
   * not committed, whatever the reason (:class:`TransactionFailed`: aborted, as
     a zombie's offsets are refused by the group; :class:`ProducerFenced`;
     :class:`TransactionStuck`; cancelled or an unexpected error, whose outcome is
     unknown): every partition of the round is given up: their staged records,
     their table writes and the producer are dropped (the stores still hold the
     last committed state) and the group is asked to rebalance, so whoever is
     assigned them next starts from their last committed offsets. Outputs and
     table writes are always dropped together: a later commit must never carry
     writes without the outputs of the same events.

A partition given up commits nothing more until it is assigned again; the next
assignment claims the worker's transactional id on a new producer
(:meth:`WorkerCommits.claim`), which aborts what the dropped one left open.
"""
from __future__ import annotations

import logging
from typing import Callable, Mapping, Optional, Protocol, Sequence

from aiokafka.structs import RecordMetadata
from confluent_kafka import KafkaException

from faust_eos import metrics
from faust_eos.committing.transaction import ProducerFenced, TransactionFailed, TransactionStuck, claimed
from faust_eos.errors import LocalStateNotWritten
from faust_eos.state.staging import SourceTP, StagedRecord, Staging, resolve

log = logging.getLogger(__name__)


class Transaction(Protocol):
    """What a round needs of the worker's producer (:class:`faust_eos.committing.transaction.TransactionalProducer`)."""

    transactional_id: str

    async def init(self) -> None: ...

    async def commit(self, records: Sequence[StagedRecord], offsets: Optional[Mapping[SourceTP, int]] = None,
                     group: Optional[bytes] = None) -> list[RecordMetadata]: ...

    def close(self) -> None: ...


class Tables(Protocol):
    """Where the table writes a round carries come from and go (:class:`faust_eos.state.table_state.TableState`)."""

    def changelog_records(self, up_to: Mapping[SourceTP, int]) -> list[StagedRecord]: ...

    def committed(self, records: Sequence[StagedRecord], metadata: Sequence[RecordMetadata]) -> None: ...

    def drop(self, source: SourceTP) -> int: ...


class WorkerCommits:
    """Runs commit rounds in the worker's one transactional producer; gives up what did not commit."""

    def __init__(
        self,
        staging: Staging,
        tables: Tables,
        new_producer: Callable[[], Transaction],
        member: Callable[[], Optional[bytes]],
        request_rejoin: Callable[[], None],
    ) -> None:
        self.staging = staging
        self.tables = tables
        #: the input partitions this worker owns in the current assignment (the manager sets them)
        self.owned: set[SourceTP] = set()
        self._new_producer = new_producer
        self._member = member
        self._request_rejoin = request_rejoin
        self._producer: Optional[Transaction] = None

    async def claim(self) -> bool:
        """Make sure a producer holds the worker's id; a new one aborts what an earlier one left open.

        False if the id could not be claimed: nothing can commit until it is.
        """
        if self._producer is not None:
            return True
        producer = self._new_producer()
        try:
            await claimed(producer)
        except (KafkaException, TransactionStuck) as exc:
            log.warning("Could not claim %s: %s", producer.transactional_id, exc)
            return False
        self._producer = producer
        log.info("Claimed %s (aborted what an earlier producer of this worker left open)", producer.transactional_id)
        return True

    async def run(self, offsets: Mapping[SourceTP, int]) -> dict[SourceTP, bool]:
        """Commit every owned partition up to its offset, in one transaction; per partition, whether it committed."""
        # 1. Only the owner of a partition may commit it.
        owned = {tp: offset for tp, offset in offsets.items() if tp in self.owned}
        for tp in offsets.keys() - owned.keys():
            self.give_up(tp, f"{tp.topic}[{tp.partition}] not owned")
        outcome = dict.fromkeys(offsets, False)
        if not owned:
            return outcome
        # 2. The committing member, checked by the group; and the producer claimed at the assignment.
        member, producer = self._member(), self._producer
        if member is None or producer is None:
            self._give_up_round(owned, "this worker is not a member of the group" if member is None
                                else "the worker's transactional id is not claimed", {})
            return outcome
        # 3. Exactly the records caused by the events being committed; of a table key, the newest write.
        outputs: list[StagedRecord] = []
        taken: dict[SourceTP, int] = {}
        for tp, offset in owned.items():
            records = self.staging.take(tp, offset)
            taken[tp] = len(records)
            outputs += records
        table_records = self.tables.changelog_records(owned)
        # 4. One transaction: the records, then every offset, with the member.
        try:
            metadata = await producer.commit(outputs + table_records, owned, member)
        # 5. One recovery per outcome: committed, or every partition of the round given up.
        except (TransactionFailed, ProducerFenced, TransactionStuck) as exc:
            if isinstance(exc, ProducerFenced):
                metrics.producers_fenced.inc()
            self._give_up_round(owned, str(exc), taken)
            return outcome
        except BaseException as exc:
            self._give_up_round(owned, f"commit ended by {exc!r}", taken)
            raise
        try:
            self.tables.committed(table_records, metadata[len(outputs):])
        except Exception as exc:
            raise LocalStateNotWritten(
                f"{', '.join(f'{tp.topic}[{tp.partition}]' for tp in owned)} committed, but their table writes could "
                f"not be stored locally ({exc!r}): stopping; the next start restores them from the changelogs"
            ) from exc
        resolve(outputs, metadata)
        outcome.update(dict.fromkeys(owned, True))
        return outcome

    def _give_up_round(self, owned: Mapping[SourceTP, int], why: str, taken: Mapping[SourceTP, int]) -> None:
        """Give up every partition of a round that did not commit, with the producer, and ask the group to
        assign them again (``taken``: the outputs the round took of each)."""
        log.warning("Giving up %s: %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(owned)), why)
        metrics.partitions_given_up.inc(len(owned))
        if self._producer is not None:
            self._producer.close()
            self._producer = None
        for tp in owned:
            self.give_up(tp, why, taken=taken.get(tp, 0))
        self._request_rejoin()

    def give_up(self, tp: SourceTP, why: str, *, taken: int = 0) -> None:
        """Drop what ``tp``'s events staged and wrote (and ``taken`` outputs already taken from staging): this
        worker cannot commit it any more, until it is assigned again."""
        self.owned.discard(tp)
        dropped = taken + len(self.staging.discard(tp)) + self.tables.drop(tp)
        if dropped:
            log.warning("Dropped %d uncommitted records of %s[%d]: %s", dropped, tp.topic, tp.partition, why)

    def close(self) -> None:
        """Drop the producer: the worker stops."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None
