"""The transaction manager: where every record sent under exactly-once goes, and how it commits.

Sends are staged with the input event that caused them (:mod:`faust_eos.state.staging`),
or, outside any event, with the worker's own producer (:mod:`faust_eos.committing.outside`);
each commit round runs one transaction for every input partition the worker owns
(:mod:`faust_eos.committing.commit`), fenced by the group's generation. At each assignment the
worker's transactional id is claimed here, if no producer holds it, before the
partitions' committed offsets are read (:mod:`faust_eos.committing.committed_reads`, which
also checks the assigned tables' local state). It is the exactly-once
:class:`~faust_eos.committing.guarantee.Guarantee`.
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Set, cast

from aiokafka.errors import KafkaError as AioKafkaError
from faust.streams import current_event
from faust.transport.consumer import TransactionManager as FaustTransactionManager
from faust.types import TP
from faust.types.tuples import FutureMessage, RecordMetadata

from faust_eos.committing.commit import WorkerCommits
from faust_eos.committing.committed_reads import CommittedReads
from faust_eos.committing.guarantee import ConsumerCalls
from faust_eos.committing.outside import OutsideEventSends, outside_transactional_id, worker_id
from faust_eos.committing.produce import producer_config
from faust_eos.committing.transaction import TransactionalProducer, group_metadata, worker_transactional_id
from faust_eos.errors import (
    MissingTopic,
    SendNotCommittable,
    wait_inside_event_refused,
)
from faust_eos.options import max_uncommitted_records, refuse_settings_that_bypass_transactions, transaction_timeout_ms
from faust_eos.state.staging import (
    UNBOUND,
    CommitFuture,
    OutputStager,
    SourceTP,
    StagedRecord,
    Staging,
    future_resolver,
    output_stager,
    staged_record,
)
from faust_eos.state.table_state import TableState

log = logging.getLogger(__name__)


class TransactionManager(FaustTransactionManager):
    """The exactly-once guarantee (:class:`~faust_eos.committing.guarantee.Guarantee`): stages sends by source
    event and commits them in the worker's transactions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: the consumer this manager commits for, as far as the commit side calls it
        self.calls = cast(ConsumerCalls, self.consumer)
        self.staging = Staging()
        self.tables = TableState(one_source=True)  # the app's tables join it at start
        self._commits = WorkerCommits(self.staging, self.tables, self._new_worker_transaction, self._member,
                                      lambda: self.calls.request_rejoin())
        self._ownership = asyncio.Lock()  # commits never overlap a change of owned partitions
        self._transaction_timeout_ms = transaction_timeout_ms(self.app.conf.broker,
                                                             self.app.conf.broker_commit_interval)
        self.reads = CommittedReads(self.app, self.tables, self.calls, self._transaction_timeout_ms / 1000,
                                    lambda: self.should_stop)
        #: staged records at which a commit starts early, so memory stays bounded
        self._max_uncommitted = max_uncommitted_records(self.app.conf.broker)
        self.outside = OutsideEventSends(self._new_outside_transaction)
        self._topics_seen: set[str] = set()
        self._topics_to_declare: set[str] = set()
        self._changelog_topics: frozenset[str] = frozenset()  # set at start, read for every record staged

    # -- lifecycle -----------------------------------------------------------
    async def on_start(self) -> None:
        # every table registered itself when declared; Faust's own property builds a new set each call
        self._changelog_topics = frozenset(self.app.tables.changelog_topics)
        refuse_settings_that_bypass_transactions(self.app.conf)
        self.tables.add(self.app.tables.values())
        self.reads.start()

    async def on_stop(self) -> None:
        await super().on_stop()
        self._commits.close()
        self.outside.close()
        self.reads.close()

    def accepts_sends(self) -> bool:
        """Once the manager runs, every record sent is staged here, inside events or not."""
        return self.started

    # -- sends -----------------------------------------------------------------
    async def send(
        self,
        topic: str,
        key: Optional[bytes],
        value: Optional[bytes],
        partition: Optional[int],
        timestamp: Optional[float],
        headers: Any,
        *,
        transactional_id: Optional[str] = None,
    ) -> Awaitable[RecordMetadata]:
        """Stage a record; what it returns resolves when its transaction commits.

        Inside an event that is the staged record itself, whose offset is asked
        of the producer only if someone reads it (:class:`~faust_eos.state.staging.StagedRecord`):
        Faust's own topics send every record through here and hold a callback
        on it that reads no offset, unless the send had a callback of its own.
        """
        event = current_event()
        if event is None or topic in self._changelog_topics:
            future = CommitFuture(loop=self.loop)
            self.stage(topic, key, value, partition, timestamp, headers, future.set_result)
            return future
        record = self.stage(topic, key, value, partition, timestamp, headers, None,
                            metadata_wanted=self.calls.sensors_read_records())
        assert record is not None  # an output record sent inside an event
        record.sent_in = event
        return record

    def output_stager(self, topic: str) -> OutputStager:
        """What stages the output records events send to ``topic``; each record it stages is an awaitable that
        resolves when its transaction commits (:func:`faust_eos.state.staging.output_stager`). A table's changelog
        is refused."""
        if topic in self._changelog_topics:
            raise SendNotCommittable(f"a record sent to {topic!r}, a table's changelog: write to the table instead")
        self._note_topic(topic)
        return output_stager(self.staging, topic)

    async def send_and_wait(
        self,
        topic: str,
        key: Optional[bytes],
        value: Optional[bytes],
        partition: Optional[int],
        timestamp: Optional[float],
        headers: Any,
        *,
        transactional_id: Optional[str] = None,
    ) -> RecordMetadata:
        """Outside an event: commit the record now and return its metadata. Inside one: refused."""
        if current_event() is not None:
            raise wait_inside_event_refused()
        self._note_topic(topic)
        await self._declare_new_topics()
        metadata: RecordMetadata = await self.outside.send_and_wait(
            staged_record(topic, key, value, partition, timestamp, headers, UNBOUND))
        return metadata

    def stage_future_message(self, fut: FutureMessage) -> None:
        """Stage a record from ``Topic.send_soon`` (e.g. a table changelog write)."""
        message = fut.message
        self.stage(message.channel.get_topic_name(), message.key, message.value, message.partition,
                   message.timestamp, message.headers, future_resolver(fut))

    def stage(self, topic: str, key: Optional[bytes], value: Optional[bytes], partition: Optional[int],
              timestamp: Optional[float], headers: Any, committed: Optional[Callable[[RecordMetadata], None]], *,
              metadata_wanted: bool = True) -> Optional[StagedRecord]:
        """Stage a record with the transaction it belongs to; the record staged with an event's output, else None.

        Sent while an agent processes an event: with that event's input
        partition, up to its offset. A table changelog write outside an event
        (a window's expiry): with the input partition whose events write that
        table partition, in its next transaction. Any other record outside an
        event (a timer, a web view): in this worker's own next transaction
        (:mod:`faust_eos.committing.outside`).
        """
        if topic not in self._topics_seen:
            self._note_topic(topic)
        event = current_event()
        record = None
        if topic in self._changelog_topics:  # a write by Faust's own table path
            if event is not None:
                source = SourceTP(event.message.topic, event.message.partition)
                offset = event.message.offset
            else:
                # a changelog write names its partition
                source, offset = self._changelog_source((topic, cast(int, partition))), UNBOUND
            self.tables.hold(staged_record(topic, key, value, partition, timestamp, headers, offset, committed), source)
        elif event is not None:
            record = self.staging.add_in_event(event, topic, key, value, partition, timestamp, headers, committed,
                                               metadata_wanted)
        else:
            self.outside.add(staged_record(topic, key, value, partition, timestamp, headers, UNBOUND, committed))
            return None
        if self.uncommitted() >= self._max_uncommitted:
            self.calls.commit_early()
        return record

    def uncommitted(self) -> int:
        """How many records (outputs and table writes) wait for their commit."""
        return len(self.staging) + self.tables.held()

    def _changelog_source(self, changelog: tuple[str, int]) -> SourceTP:
        """Where a changelog write made outside an event commits: its table partition's input partition."""
        tp = self.tables.source_of(changelog)
        if tp is None:
            topic, partition = changelog
            raise SendNotCommittable(
                f"a write to {topic}[{partition}] outside any event, before any event of this worker "
                "wrote that table partition: under exactly_once a table write commits with the input "
                "partition that writes the table"
            )
        return tp

    def _note_topic(self, topic: str) -> None:
        if topic in self._topics_seen:
            return
        self._topics_seen.add(topic)
        if topic not in self._changelog_topics:  # Faust creates changelogs itself
            self._topics_to_declare.add(topic)

    async def _declare_new_topics(self) -> None:
        """Create the topics records are sent to that the cluster lacks, as Faust would declare them."""
        conf = self.app.conf
        while self._topics_to_declare:
            topic = next(iter(self._topics_to_declare))
            if conf.topic_allow_declare:
                try:
                    await self.create_topic(topic, conf.topic_partitions, conf.topic_replication_factor)
                except AioKafkaError as exc:
                    raise self._missing(topic, f"the cluster refused to create it ({exc})") from exc
            elif not await self.reads.topic_exists(topic):
                raise self._missing(topic, "it does not exist, and this app may not create topics "
                                           "(topic_allow_declare=False)")
            self._topics_to_declare.discard(topic)

    def _missing(self, topic: str, why: str) -> MissingTopic:
        partitions = self.app.conf.topic_partitions
        line = (f"records are sent to topic {topic!r}, but {why}: create it with {partitions} partitions, "
                "or let this app create topics")
        log.error(line)
        return MissingTopic(line)

    async def flush(self) -> None:
        """Nothing to flush: records leave only inside commits."""

    # -- commits ---------------------------------------------------------------
    async def commit(self, offsets: Mapping[TP, int], start_new_transaction: bool = True) -> bool:
        """Commit ``offsets`` (next offset to read, per input partition) with their records.

        One transaction for them all (:mod:`faust_eos.committing.commit`); True if it committed every one.
        """
        await self._declare_new_topics()
        source_offsets = {SourceTP(tp.topic, tp.partition): offset for tp, offset in offsets.items()}
        async with self._ownership:
            committed = await self._commits.run(source_offsets)
        self.calls.count_committed(sum(committed.values()))
        return all(committed.values())

    async def commit_outside_events(self, committable: Callable[[TP], Optional[int]]) -> None:
        """Commit what no input event caused, once per commit round.

        Table writes made outside an event go with their input partition's next
        transaction, even when it has no new offset to commit (``committable``:
        how far that partition may commit now); other records in this worker's own.
        """
        unbound = {}
        for tp in self.tables.unbound_sources():
            offset = committable(TP(tp.topic, tp.partition))
            if offset is not None:  # else not positioned yet: a later round takes them
                unbound[TP(tp.topic, tp.partition)] = offset
        if unbound:
            await self.commit(unbound)
        if len(self.outside):
            await self._declare_new_topics()
            await self.outside.commit()

    # -- ownership -------------------------------------------------------------
    async def on_partitions_revoked(self, revoked: Set[TP]) -> None:
        """Nothing to flush: the consumer drops the revoked partitions' records itself (:meth:`drop`)."""

    def drop(self, revoked: Iterable[TP]) -> None:
        """Faust forgot the revoked partitions' pending offsets: drop their records, commit nothing more of them.

        Nothing of theirs may commit any more: events processed after the hand-over
        commit had their records dropped, and events the streams skip while the
        rebalance runs may be acknowledged unprocessed.
        """
        for tp in revoked:  # its table partitions are no longer written here: a later expiry must not go there
            self._commits.give_up(SourceTP(tp.topic, tp.partition), f"{tp.topic}[{tp.partition}] revoked before commit")

    def owns(self, tp: TP) -> bool:
        """Whether this worker owns input partition ``tp`` in the current assignment, its id claimed.

        From then on the group refuses a previous owner's offsets, and the stable read
        waits for any it sent before, so the committed offset read is final.
        """
        return SourceTP(tp.topic, tp.partition) in self._commits.owned

    async def on_rebalance(self, assigned: Set[TP], revoked: Set[TP], newly_assigned: Set[TP]) -> None:
        """Own the assigned input partitions, claiming the worker's transactional id if no producer holds it,
        then check the assigned tables' local state.

        The claim comes before the partitions' committed offsets are read: it aborts
        what an earlier producer of this worker (before a restart, or dropped after a
        failed commit) left open, offsets included, which that read would wait for.
        """
        async with self._ownership:
            self._commits.owned.clear()
            if not await self._commits.claim():
                # unclaimed, nothing can commit: ask for another rebalance
                self.calls.request_rejoin()
                return
            self._commits.owned.update(
                SourceTP(tp.topic, tp.partition)
                for tp in assigned
                if not self.app.assignor.is_standby(tp) and tp.topic not in self._changelog_topics
            )
            await self.reads.check_local_state({tp for tp in assigned if tp.topic in self._changelog_topics})

    async def committed_offsets(self, tps: Iterable[TP]) -> Mapping[TP, Optional[int]]:
        """The group's committed offsets, once no transaction still holds them pending."""
        return await self.reads.stable_committed_offsets(tps)

    async def refuse_lost_offsets(self, committed: Mapping[TP, Optional[int]], sources: Iterable[TP]) -> None:
        """Raise :class:`~faust_eos.errors.OffsetsLost` if the group lost the committed offsets of input
        partitions whose tables' changelogs hold committed records."""
        await self.reads.refuse_lost_offsets(committed, sources)

    async def changelog_ends(self, tps: Iterable[TP]) -> Mapping[TP, int]:
        """Per changelog partition, the offset past its last committed record, once no transaction is open
        there (:meth:`~faust_eos.committing.committed_reads.CommittedReads.restore_ends`)."""
        return await self.reads.restore_ends(tps)

    # -- helpers ---------------------------------------------------------------
    def _new_transaction(self, txn_id: str) -> TransactionalProducer:
        return TransactionalProducer(
            transactional_id=txn_id,
            producer_config={**producer_config(self.app.conf),
                             "transaction.timeout.ms": self._transaction_timeout_ms},
            call_timeout_s=min(10.0, self._transaction_timeout_ms / 1000 / 3),
        )

    def _new_worker_transaction(self) -> TransactionalProducer:
        worker = worker_id(Path(self.app.conf.datadir))
        return self._new_transaction(worker_transactional_id(self.app.conf.id, worker))

    def _new_outside_transaction(self) -> TransactionalProducer:
        worker = worker_id(Path(self.app.conf.datadir))
        return self._new_transaction(outside_transactional_id(self.app.conf.id, worker))

    def _member(self) -> Optional[bytes]:
        """This worker's membership of the group, as the broker checks it at a commit; None while it has none."""
        generation, member_id = self.calls.group_membership()
        if generation < 0 or not member_id:
            return None
        return group_metadata(self.app.conf.id, generation, member_id)
