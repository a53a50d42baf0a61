"""Producing staged records through confluent-kafka, under both guarantees.

A commit produces the records its events staged in one step,
:func:`produce_all`: the producer first learns the metadata of each topic it
has not written yet, then every record is handed to it (a full local queue is
waited out for at most one call timeout), then one flush, then every record
acknowledged or the step fails. Exactly-once runs it inside a transaction
(:mod:`faust_eos.committing.transaction`), at-least-once before committing the offsets to
the group (:mod:`faust_eos.committing.at_least_once`), so the two differ by the
transaction alone. Each producer's calls run on a thread of their own
(:class:`CallThread`), never on the event loop; at-least-once serves its
delivery reports on the event loop (:class:`faust_eos.committing.at_least_once.PlainProducer`).
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Optional, Sequence, TypeVar

from aiokafka.structs import RecordMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from faust_eos.security import librdkafka_client
from faust_eos.state.staging import OFFSET_NOT_ASKED, StagedRecord

_T = TypeVar("_T")

#: longest wait for deliveries to drain a full local produce queue, per poll
BACKPRESSURE_POLL_S = 0.05
#: longest one flush call waits before the wait for deliveries looks at its progress
FLUSH_SLICE_S = 0.25
#: the partition argument of ``produce`` that lets the producer's partitioner choose (librdkafka's unassigned partition)
ANY_PARTITION = -1


def producer_config(conf: Any) -> dict[str, Any]:
    """The settings every producer of the worker shares, transactional or not (``conf``: ``app.conf``)."""
    return {
        **librdkafka_client(conf),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 1,
        "partitioner": "murmur2_random",  # the Java client's partitioner, as Faust uses
        "retry.backoff.ms": 20,
    }


def produce_all(producer: Producer, records: Sequence[StagedRecord], timeout_s: float,
                on_step: Callable[[str], None], known_topics: set[str], *, deadline: float,
                on_progress: Callable[[], None] = lambda: None,
                report_every_record: bool = True) -> list[RecordMetadata]:
    """Produce ``records`` and wait until each is acknowledged; their metadata, in order.

    :func:`send_all`, then :func:`flush_while_delivering` (``timeout_s`` without a
    delivery, or past ``deadline``, a monotonic time, fails it; ``on_progress`` is
    called as deliveries come in), then :meth:`Deliveries.metadata`. Raises
    :class:`KafkaException` as they do. Blocking: run it on the producer's thread.
    """
    deliveries = send_all(producer, records, timeout_s, on_step, known_topics,
                          report_every_record=report_every_record)
    on_step("flush")
    undelivered = flush_while_delivering(producer, timeout_s, deadline, on_progress)
    if undelivered is not None:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{undelivered} ({deliveries.delivered_text()})"))
    return deliveries.metadata(timeout_s)


def flush_while_delivering(producer: Producer, stall_s: float, deadline: float,
                           on_progress: Callable[[], None]) -> Optional[str]:
    """Wait until every record queued in ``producer`` is acknowledged, for as long as acknowledgements come;
    None once they all are, else what is left undelivered and why.

    A large commit on a busy worker can take longer than any fixed wait: each
    delivery report served here takes the GIL from the event loop. So the wait
    ends only once ``stall_s`` pass with no record acknowledged, or at
    ``deadline`` (a monotonic time: the transaction's caller keeps it inside the
    transaction timeout).
    """
    waiting: Optional[int] = None
    last_progress = time.monotonic()
    while True:
        now = time.monotonic()
        left = producer.flush(max(0.0, min(FLUSH_SLICE_S, deadline - now, last_progress + stall_s - now)))
        if not left:
            return None
        now = time.monotonic()
        if waiting is None or left < waiting:  # the stall is counted from the first look at what is left
            last_progress = now
            on_progress()
        waiting = left
        if now - last_progress >= stall_s:
            return f"{left} records undelivered: none acknowledged for {stall_s:.1f} s"
        if now >= deadline:
            return f"{left} records undelivered at the end of the time the transaction has for them"


def send_all(producer: Producer, records: Sequence[StagedRecord], timeout_s: float,
             on_step: Callable[[str], None], known_topics: set[str], *,
             report_every_record: bool = True) -> Deliveries:
    """Hand ``records`` to the producer, without waiting for them; their :class:`Deliveries`.

    ``known_topics`` are the topics this producer holds metadata for; the others
    are learnt first, and added once learnt. Raises :class:`KafkaException` if
    learning failed, or if the local queue stayed full for ``timeout_s``.
    ``on_step`` is told each step as it begins. Blocking: run it
    on the producer's thread.

    Without ``report_every_record`` (inside a transaction, whose commit fails if
    any of its records did), the producer reports the delivery only of the
    records whose metadata someone reads, and of the last table write of each
    changelog partition (its offset is the table's new checkpoint): each report
    makes the thread serving it take the GIL. The others get metadata with an
    offset of -1 (:data:`faust_eos.state.staging.OFFSET_NOT_ASKED`).
    """
    for topic in {record.topic for record in records} - known_topics:
        on_step(f"list_topics {topic}")
        if _learn_topic(producer, topic, timeout_s):
            known_topics.add(topic)
    deliveries = Deliveries(records, set(range(len(records))) if report_every_record else reported_indexes(records))
    on_step("produce")
    drained_by = time.monotonic() + timeout_s  # back-pressure: one bounded wait per call
    produce = producer.produce
    reported = deliveries.reported
    for index, record in enumerate(records):
        partition = ANY_PARTITION if record.partition is None else record.partition
        # Most records need no report, timestamp or headers: those are produced with positional arguments
        # only, which confluent-kafka takes in half the time of keywords, and with no call around it
        # unless the local queue is full (this runs for every record).
        if record.timestamp_ms is None and not record.headers and index not in reported:
            try:
                produce(record.topic, record.value, record.key, partition)
                continue
            except BufferError:
                options: dict[str, Any] = {}
        else:
            options = {}
            if index in reported:
                options["on_delivery"] = deliveries.on_delivery(index)
            if record.timestamp_ms is not None:
                options["timestamp"] = record.timestamp_ms
            if record.headers:
                options["headers"] = list(record.headers)
        _produce(producer, (record.topic, record.value, record.key, partition), options, drained_by, timeout_s)
    return deliveries


class Deliveries:
    """The delivery reports of one batch of records, filled in by whichever thread serves them."""

    def __init__(self, records: Sequence[StagedRecord], reported: set[int]) -> None:
        self._records = records
        #: the indexes of the records whose delivery is reported
        self.reported = reported
        self._delivered: list[Optional[RecordMetadata]] = [None] * len(records)
        self._errors: list[KafkaError] = []
        self.waiting = len(reported)  # reports not served yet, failed ones included

    def on_delivery(self, index: int) -> Callable[[Optional[KafkaError], Message], None]:
        def report(err: Optional[KafkaError], msg: Message) -> None:
            self.waiting -= 1
            if err is not None:
                self._errors.append(err)
            else:
                self._delivered[index] = record_metadata(msg)

        return report

    def delivered_text(self) -> str:
        """Where the reported records delivered so far landed, per partition."""
        return f"delivered: {_offsets_text(self._delivered)}"

    def metadata(self, timeout_s: float) -> list[RecordMetadata]:
        """Each record's metadata, in order. Raises :class:`KafkaException` if a reported record failed,
        or if one is still unreported (``timeout_s``: how long it was waited for)."""
        if self._errors:
            raise KafkaException(self._errors[0])
        undelivered = sum(1 for index in self.reported if self._delivered[index] is None)
        if undelivered:
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, f"{undelivered} records undelivered after {timeout_s} s "
                                                  f"({self.delivered_text()})")
            )
        not_asked: dict[tuple[str, Optional[int]], RecordMetadata] = {}  # the same for every record of a partition
        metadata = []
        for md, record in zip(self._delivered, self._records):
            if md is None:
                md = not_asked.get((record.topic, record.partition))
                if md is None:
                    md = not_asked[(record.topic, record.partition)] = _not_asked(record)
            metadata.append(md)
        return metadata


def reported_indexes(records: Sequence[StagedRecord]) -> set[int]:
    """The records whose delivery must be reported: those whose metadata is read, and the last table
    write of each changelog partition."""
    last_write: dict[tuple[str, Optional[int]], int] = {}
    reported = set()
    for index, record in enumerate(records):
        if record.write is not None:
            last_write[(record.topic, record.partition)] = index
        if record.needs_metadata():
            reported.add(index)
    return reported | set(last_write.values())


def _not_asked(record: StagedRecord) -> RecordMetadata:
    """The metadata of a record whose delivery was not reported: where it went, not its offset."""
    partition = record.partition if record.partition is not None else -1
    return RecordMetadata(record.topic, partition, AioTopicPartition(record.topic, partition), OFFSET_NOT_ASKED,
                          -1, None, None)


def _learn_topic(producer: Producer, topic: str, timeout_s: float) -> bool:
    """Fetch the metadata of ``topic`` for ``producer`` now; True if it came without an error for the topic.

    A record for a topic librdkafka knows nothing of waits for its periodic
    topic scan, about a second, before it can be sent: so did the first commit
    of every new partition producer to each topic, and the first commit to a
    topic written rarely, such as dead letters. A topic the answer has an error
    for (just created, no leader yet) is asked about again at the next commit.
    """
    try:
        metadata = producer.list_topics(topic, timeout=timeout_s)
    except RuntimeError as exc:  # librdkafka refused the topic's name: as produce() reports it
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, f"topic {topic!r}: {exc}")) from exc
    known = metadata.topics.get(topic)
    return known is not None and known.error is None


def _produce(producer: Producer, record: tuple[str, Optional[bytes], Optional[bytes], int], options: dict[str, Any],
             drained_by: float, timeout_s: float) -> None:
    """``producer.produce(topic, value, key, partition, **options)``, waiting out a full local queue."""
    while True:
        try:
            if options:
                producer.produce(*record, **options)
            else:
                producer.produce(*record)
            return
        except BufferError:  # local queue full: let deliveries drain it
            remaining_s = drained_by - time.monotonic()
            if remaining_s <= 0:
                raise KafkaException(
                    KafkaError(
                        KafkaError._QUEUE_FULL,
                        f"local produce queue still full after {timeout_s} s: deliveries do not drain it",
                    )
                ) from None
            producer.poll(min(BACKPRESSURE_POLL_S, remaining_s))


class CallThread:
    """A daemon thread running calls one at a time, in order.

    Daemon, unlike an executor's threads: a call stuck inside librdkafka must
    not keep the worker process from exiting.
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Optional[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]]] = (
            queue.SimpleQueue())
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        future: Future[_T] = Future()
        self._calls.put((future, fn, args))
        return future

    def close(self) -> None:
        """Stop after the calls already submitted."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args = call
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the caller
                    future.set_exception(exc)
            del call, future, fn, args  # drop references (the producer's, at close) on this thread


def release(producer: Producer) -> None:
    """Submitted to a producer's own thread at close: the last reference goes when this returns."""


def _offsets_text(delivered: Sequence[Optional[RecordMetadata]]) -> str:
    """Where the delivered records landed, per partition: ``topic[p]@first-last``."""
    spans: dict[tuple[str, int], list[int]] = {}
    for md in delivered:
        if md is not None:
            span = spans.setdefault((md.topic, md.partition), [md.offset, md.offset])
            span[0], span[1] = min(span[0], md.offset), max(span[1], md.offset)
    return ", ".join(
        f"{topic}[{partition}]@{first}-{last}" for (topic, partition), (first, last) in sorted(spans.items())
    ) or "none"


def record_metadata(msg: Message) -> RecordMetadata:
    """A delivered record's metadata, in the form Faust's futures resolve with."""
    tp = AioTopicPartition(msg.topic(), msg.partition())
    timestamp_type, timestamp = msg.timestamp()
    return RecordMetadata(
        topic=msg.topic(),
        partition=msg.partition(),
        topic_partition=tp,
        offset=msg.offset(),
        timestamp=timestamp,
        timestamp_type=timestamp_type,
        log_start_offset=None,
    )
