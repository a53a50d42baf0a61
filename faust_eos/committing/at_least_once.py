"""At-least-once on the exactly-once path, without transactions.

An event's output records are staged with its input partition and offset as
under exactly-once (:mod:`faust_eos.state.staging`), and its table writes kept by
their tables (:mod:`faust_eos.state.table_writes`). When offsets commit
(:meth:`AtLeastOnce.commit`):

1. the output records of the events being committed are taken, and of each
   table key those events wrote, the newest write, as one changelog record;
2. one idempotent, non-transactional confluent-kafka producer produces the
   output records and waits until each is acknowledged
   (:meth:`PlainProducer.deliver`);
3. then it produces the table changelog records the same way;
4. the table writes reach RocksDB with their checkpoints and the records'
   futures resolve; then, and only then, the offsets commit to the group.

Outputs go before table writes because a table write can record that an event
was handled (a deduplication mark, a stream time). Written in one step, a crash
in its middle could leave such a mark in the changelog without the event's
output: the replay from the committed offset would then skip the event, and its
output would be lost. In this order a crash leaves outputs without their table
writes at worst, and the replay writes them again: duplicates, never loss.

If step 2 or 3 fails, the outputs are staged again, the table writes stay, and the offsets stay
uncommitted: the next commit produces them again (some may then be written
twice, never lost). If a record can never be written (too large, not
authorised), retrying cannot help: :class:`OutputNotWritten` stops the worker,
and its events since the last commit are processed again at its next start. A
crash between steps 3 and 4 replays events whose records may already be
written: duplicates, never loss.

So at-least-once runs the same staging, producer and batching as exactly-once,
and the two differ by the transactions alone. Records sent outside any event
(a timer, a web view) and by
``send_and_wait`` go straight to Faust's producer; if one of those fails, no
offset commits any more and the worker stops at its next commit
(:class:`OutputNotWritten`), as Faust's flush does not report it. A write of an
``eos-rocksdb://`` table outside an event waits for the next commit.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, cast

from aiokafka.structs import RecordMetadata
from confluent_kafka import KafkaError, KafkaException, Producer
from faust.streams import current_event
from faust.types import TP
from faust.types.tuples import FutureMessage
from mode import Service

from faust_eos.committing.guarantee import ConsumerCalls
from faust_eos.committing.offsets import CommittedOffsets
from faust_eos.committing.produce import CallThread, Deliveries, release, send_all
from faust_eos.errors import OutputNotWritten, SendNotCommittable
from faust_eos.state.staging import (
    UNBOUND,
    CommitFuture,
    OutputStager,
    SourceTP,
    StagedRecord,
    Staging,
    future_resolver,
    output_stager,
    resolve,
    staged_record,
)
from faust_eos.state.table_state import TableState

log = logging.getLogger(__name__)

#: longest a producer call may take: librdkafka gives up on it after this. One producer writes
#: a whole commit round, which under a backlog can hold hundreds of thousands of records.
CALL_TIMEOUT_S = 30.0
#: records librdkafka may queue locally (its default, 100,000, is less than one such round)
QUEUED_RECORDS = 2_000_000
#: pause between two servings of delivery reports while a commit waits for them
REPORTS_POLL_S = 0.002
#: errors of a record that no retry can write
UNWRITABLE = {
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.INVALID_RECORD,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError._INVALID_ARG,
}


class PlainProducer:
    """An idempotent confluent-kafka producer on a thread of its own, producing batches of staged records."""

    def __init__(self, config: dict[str, Any], *, timeout_s: float = CALL_TIMEOUT_S,
                 producer_factory: Callable[[dict[str, Any]], Producer] = Producer) -> None:
        # A record undelivered after one call is given up by librdkafka as well, so a failed
        # commit's records are not still queued when the next commit produces them again.
        self._config = {**config, "message.timeout.ms": int(timeout_s * 1000),
                        "queue.buffering.max.messages": QUEUED_RECORDS}
        self._timeout_s = timeout_s
        self._factory = producer_factory
        self._producer: Optional[Producer] = producer_factory(self._config)
        self._known_topics: set[str] = set()  # topics self._producer holds metadata for
        self._generation = 0  # how many times the producer was replaced
        self._thread = CallThread("eos-at-least-once")
        self._one_at_a_time = asyncio.Lock()
        self._closed = False

    async def deliver(self, records: Sequence[StagedRecord]) -> list[RecordMetadata]:
        """Produce ``records``; their metadata once each is acknowledged. Raises :class:`KafkaException`.

        The records are handed to the producer on its thread; their delivery
        reports are served here, on the event loop, each poll serving all that
        arrived since the last. Served on the producer's thread (by a flush),
        each of them took the GIL from the busy event loop one at a time, and a
        commit of many records took seconds. One delivery at a time: the
        producer's thread must not serve reports, nor replace the producer,
        while the loop serves them.
        """
        async with self._one_at_a_time:
            if self._closed:  # the worker is stopping: what is still held is processed again at its next start
                raise KafkaException(KafkaError(KafkaError._DESTROY, "the at-least-once producer is closed"))
            generation, deliveries = await asyncio.wrap_future(self._thread.submit(self._send, records))
            try:
                await self._serve_reports(deliveries)
                return deliveries.metadata(self._timeout_s)
            except KafkaException as exc:
                if exc.args[0].fatal():  # an idempotent producer that lost its sequence cannot go on: a fresh one
                    self._thread.submit(self._renew, generation, exc)
                raise

    def _send(self, records: Sequence[StagedRecord]) -> tuple[int, Deliveries]:
        try:
            return self._generation, send_all(self._producer, records, self._timeout_s, lambda step: None,
                                              self._known_topics)
        except KafkaException as exc:
            if exc.args[0].fatal():
                self._renew(self._generation, exc)
            raise

    async def _serve_reports(self, deliveries: Deliveries) -> None:
        served_by = time.monotonic() + self._timeout_s
        while True:
            if self._closed:
                raise KafkaException(KafkaError(KafkaError._DESTROY, "the at-least-once producer closed"))
            assert self._producer is not None
            self._producer.poll(0)  # not closed: the producer is there (it is replaced only between deliveries)
            if not deliveries.waiting or time.monotonic() >= served_by:
                return
            await asyncio.sleep(REPORTS_POLL_S)

    def _renew(self, generation: int, failure: KafkaException) -> None:
        """Runs on the producer's thread: a fresh producer in place of the one of ``generation``, which
        failed for good, unless it was already replaced."""
        if generation == self._generation and not self._closed:
            log.warning("The at-least-once producer failed for good (%s); starting a new one", failure.args[0].str())
            self._producer = self._factory(self._config)
            self._known_topics = set()
            self._generation += 1

    def close(self) -> None:
        """Drop the producer, on its own thread after any call still running there."""
        self._closed = True
        self._thread.submit(self._release)
        self._thread.close()

    def _release(self) -> None:
        """Runs on the producer's thread, after any delivery (which may have replaced the producer)."""
        producer, self._producer = self._producer, None
        release(producer)


class AtLeastOnce(Service):
    """The at-least-once guarantee (:class:`~faust_eos.committing.guarantee.Guarantee`): an event's records,
    held until its offset commits, then produced in one batch with the others. A service of the consumer's,
    as the transaction manager is under exactly-once."""

    def __init__(self, tables: TableState, producer: Any, consumer: ConsumerCalls, max_held: int,
                 offsets: Callable[[], CommittedOffsets], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.staging = Staging()
        self._producer = producer
        self._consumer = consumer
        self._max_held = max_held
        self._output_failure: Optional[BaseException] = None
        self._new_offsets_reader = offsets
        self._offsets_reader: Optional[CommittedOffsets] = None  # made at the first read

    def accepts_sends(self) -> bool:
        """Records sent inside an event are held here; others go out at once, through Faust's producer."""
        return current_event() is not None

    def stages(self, topic: str) -> bool:
        """Whether a record sent now to ``topic`` is held here: inside an event, or a table's changelog write."""
        return current_event() is not None or topic in self.tables.changelog_topics

    def output_failed(self, exc: BaseException) -> None:
        """A record sent straight to Faust's producer failed: no offset may commit any more."""
        if self._output_failure is None:
            log.error("An output record could not be written (%r): the worker stops at its next commit, "
                      "and its events since the last commit are processed again", exc)
            self._output_failure = exc

    async def send(self, topic: str, key: Optional[bytes], value: Optional[bytes], partition: Optional[int],
                   timestamp: Optional[float], headers: Any) -> CommitFuture:
        """Hold a record sent inside an event; the future resolves once it is acknowledged, at the commit."""
        future = CommitFuture(loop=asyncio.get_running_loop())
        future.sent_in = current_event()
        self.stage(topic, key, value, partition, timestamp, headers, future.set_result)
        return future

    def output_stager(self, topic: str) -> OutputStager:
        """What holds the output records events send to ``topic``; each record it holds is an awaitable that
        resolves once it is acknowledged, at the commit (:func:`faust_eos.state.staging.output_stager`). A table's
        changelog is refused."""
        if topic in self.tables.changelog_topics:
            raise SendNotCommittable(f"a record sent to {topic!r}, a table's changelog: write to the table instead")
        return output_stager(self.staging, topic)

    def stage_future_message(self, fut: FutureMessage) -> None:
        """Hold a record from ``Topic.send_soon`` (e.g. a table changelog write)."""
        message = fut.message
        self.stage(message.channel.get_topic_name(), message.key, message.value, message.partition,
                   message.timestamp, message.headers, future_resolver(fut))

    def stage(self, topic: str, key: Optional[bytes], value: Optional[bytes], partition: Optional[int],
              timestamp: Optional[float], headers: Any,
              committed: Optional[Callable[[RecordMetadata], None]]) -> None:
        """Hold a record with the event being processed (outside events: a table write, till the next commit)."""
        event = current_event()
        if topic in self.tables.changelog_topics:  # a write by Faust's own table path
            if event is not None:
                source, offset = SourceTP(event.message.topic, event.message.partition), event.message.offset
            else:  # commits with the next commit, whatever its offsets (a changelog write names its partition)
                source, offset = SourceTP(topic, cast(int, partition)), UNBOUND
            self.tables.hold(staged_record(topic, key, value, partition, timestamp, headers, offset, committed), source)
        elif event is not None:
            self.staging.add_in_event(event, topic, key, value, partition, timestamp, headers, committed)
        else:
            raise SendNotCommittable(f"a record to {topic!r} outside any event is Faust's producer's to send")
        if self.uncommitted() >= self._max_held:
            self._consumer.commit_early()

    def uncommitted(self) -> int:
        """How many records (outputs and table writes) wait for their commit."""
        return len(self.staging) + self.tables.held()

    async def commit(self, offsets: Mapping[TP, int]) -> bool:
        """Write the records of the events below ``offsets``, then commit ``offsets`` to the group; True if the
        group accepted them. Raises :class:`OutputNotWritten` if a record can never be written."""
        try:
            await self.write_up_to(offsets)
        except KafkaException as exc:
            log.warning("The records of the events being committed were not all written, offsets not "
                        "committed; the next commit writes them again: %s", exc)
            return False
        accepted = await self._consumer.commit_offsets_to_group(offsets)
        if accepted:
            self._consumer.count_committed(len(offsets))
        return accepted

    async def commit_outside_events(self, committable: Callable[[TP], Optional[int]]) -> None:
        """Nothing of its own: a table write outside events goes with the next commit of offsets, and other
        records outside events went out at once."""

    def owns(self, tp: TP) -> bool:
        """Every assigned partition: without transactions no claim fences an earlier owner."""
        return True

    async def committed_offsets(self, tps: Iterable[TP]) -> Mapping[TP, Optional[int]]:
        """The group's committed offsets, read on a thread (the reader blocks)."""
        tps = list(tps)
        if not tps:
            return {}
        if self._offsets_reader is None:
            self._offsets_reader = self._new_offsets_reader()
        return await asyncio.get_running_loop().run_in_executor(None, self._offsets_reader.read, tps)

    async def refuse_lost_offsets(self, committed: Mapping[TP, Optional[int]], sources: Iterable[TP]) -> None:
        """Nothing to refuse: a group that lost its offsets replays from the first record, which repeats effects
        at worst and loses none."""

    async def changelog_ends(self, tps: Iterable[TP]) -> None:
        """None: the consumer's own answer (the high watermarks) is where a restore ends."""
        return None

    async def write_up_to(self, offsets: Mapping[TP, int]) -> None:
        """Produce and store the records of events below ``offsets``, and any table writes made outside events.

        Raises what the producer raises; the records are then held again, for the next commit. Raises
        :class:`OutputNotWritten` if a record can never be written, or one sent straight failed.
        """
        if self._output_failure is not None:
            raise OutputNotWritten(f"an output record could not be written: {self._output_failure!r}")
        # 1. The outputs of the events being committed; of a table key, the newest write.
        taken: list[tuple[SourceTP, list[StagedRecord]]] = []
        up_to = {source: 0 for source in self.tables.unbound_sources()}  # writes outside events: the next commit's
        for tp, offset in offsets.items():
            source = SourceTP(tp.topic, tp.partition)
            taken.append((source, self.staging.take(source, offset)))
            up_to[source] = offset
        outputs = [record for _, partition_records in taken for record in partition_records]
        table_writes = self.tables.changelog_records(up_to)
        if not outputs and not table_writes:
            return
        # 2. and 3. The outputs acknowledged, then the table writes; or all of them held again.
        try:
            metadata = await self._producer.deliver(outputs) if outputs else []
            if table_writes:
                metadata += await self._producer.deliver(table_writes)
        except BaseException as exc:
            for source, partition_records in taken:
                self.staging.put_back(source, partition_records)
            self.tables.not_committed(table_writes)
            if isinstance(exc, KafkaException) and exc.args[0].code() in UNWRITABLE:
                self.output_failed(exc)
                raise OutputNotWritten(f"a record cannot be written: {exc.args[0].str()}") from exc
            raise
        # 4. Local state, then the senders; the caller commits the offsets next.
        self.tables.committed(table_writes, metadata[len(outputs):])
        resolve(outputs, metadata)

    def drop(self, tps: Iterable[TP]) -> None:
        """Forget the held records of revoked input partitions: their events will be processed again."""
        for tp in tps:
            source = SourceTP(tp.topic, tp.partition)
            dropped = len(self.staging.discard(source)) + self.tables.drop(source)
            if dropped:
                log.info("Dropped %d unwritten records of %s[%d]", dropped, tp.topic, tp.partition)

    async def on_stop(self) -> None:
        """Drop the producer, and the offsets reader off the event loop (its close waits for a read running)."""
        self._producer.close()
        if self._offsets_reader is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._offsets_reader.close)
