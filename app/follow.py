"""``reconcile --follow``: check the pipeline's output against its input for ever, read-only.

Each round (every ``--check-seconds``):

1. read the pipeline group's committed offsets of the input and ``payments-by-merchant``;
2. take the ends (LSO, then high watermark) of ``payments-by-merchant`` and
   ``merchant-totals``, then of the input: an update read below its topic's LSO was
   committed before the input's end was taken, so the input event that caused it
   lies below the input's end;
3. read every topic up to its LSO, ``read_committed``, from where the last round stopped;
4. judge what was read (:class:`app.follow_state.FollowState`): input events first,
   then their ``payments-by-merchant`` records, then the updates. Then the expected
   events that the group offsets of an earlier round passed are missing; judged once
   the outputs' LSO has reached their high watermark of that round, so that every
   transaction that moved those offsets is visible (a broker restart can hold its
   commit markers back for a while);
5. save the state (positions, watermarks, dedup memory) atomically, so a restart resumes from it.

A round that fails (the broker away, a read timing out, a disk full) is
undone: the next one starts again from the saved state. It never writes to the
pipeline's topics or its group, and does not join the group. Each difference is
one line on stdout (and one JSON line in ``--differences``); the watermarks,
their lag behind the input, the last round's time and the difference counts
are Prometheus series on ``--metrics-port``.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from prometheus_client import start_http_server
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.follow_state import KINDS, Difference, FollowState
from app.reconcile import SENTINEL_HEADER
from config import Settings
from kafka_ops.offsets import PartitionOffsets, WatermarkReader, read_offsets
from kafka_ops.records import END_READER_FETCH_WAIT_MS, ready_records

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 60.0  # longest a round waits for its records before it gives up and the next one tries again
OFFSETS_TIMEOUT_S = 10.0

Partition = tuple[str, int]


class Follower:
    """The rounds of ``reconcile --follow`` on one set of pipeline topics."""

    def __init__(self, settings: Settings, state_path: Path, differences_path: Optional[Path] = None,
                 say: Callable[[str], None] = print) -> None:
        self.settings, self.state_path, self.differences_path, self.say = settings, state_path, differences_path, say
        self._state_settings = dict(input_topic=settings.input_topic, by_merchant_topic=settings.by_merchant_topic,
                                    retention_s=settings.dedup_retention_days * 86_400,
                                    max_event_bytes=settings.max_event_bytes,
                                    max_amount_cents=settings.max_amount_cents)
        self.state = FollowState(**self._state_settings)
        self.resumed = self.state.load(state_path)
        self.topics = (settings.input_topic, settings.by_merchant_topic, settings.totals_topic)
        client = settings.kafka_client()
        self._reader_config = {**client, "group.id": f"{settings.app_id}-reconcile-follow",
                               "enable.auto.commit": False, "isolation.level": "read_committed",
                               "enable.partition.eof": True, "auto.offset.reset": "earliest",
                               "fetch.wait.max.ms": END_READER_FETCH_WAIT_MS}
        self._open_clients()
        self.input_ends: dict[int, int] = {}
        self.last_round_s: Optional[float] = None
        #: the group offsets of an earlier round and the outputs' high watermarks just after: what
        #: missing events are judged against, once the outputs' LSO has reached those
        self._judged_against: Optional[tuple[dict[Partition, int], dict[Partition, int]]] = None
        self._assignment: list[Partition] = []  # what the reader reads; [] until the first round, or after a failed one
        self._at_end: dict[Partition, int] = {}  # the offset of each partition's last end-of-partition event
        self.lock = threading.Lock()  # the state changes under it; the metrics read it under it

    # -- one round -------------------------------------------------------------
    def round(self) -> list[Difference]:
        """Steps 1 to 5. If it raises, the state may be changed in part: :meth:`reset` goes back to the saved one."""
        partitions = self._partitions()
        committed = self._committed([tp for tp in partitions if tp[0] != self.settings.totals_topic])  # 1.
        outputs = self._offsets([tp for tp in partitions if tp[0] != self.settings.input_topic])  # 2.
        inputs = self._offsets([tp for tp in partitions if tp[0] == self.settings.input_topic])
        ends = {tp: o.last_stable_offset for tp, o in {**outputs, **inputs}.items()}
        records = self._read_up_to(ends)  # 3.
        with self.lock:
            found = self._judge(records)  # 4.
            if self._judged_against is not None and all(
                    ends[tp] >= high for tp, high in self._judged_against[1].items()):
                found += self.state.judge_missing(self._judged_against[0])
                self._judged_against = None
            if self._judged_against is None:
                self._judged_against = (committed, {tp: o.high_watermark for tp, o in outputs.items()})
            for (topic, partition), end in ends.items():  # never back: an end read lower just after a broker restart
                positions = self.state.positions.setdefault(topic, {})
                positions[partition] = max(end, positions.get(partition, end))
            self.state.forget_expired()
            self.state.rounds += 1
            self._report(found)  # before the save: killed between, the next run reports them again rather than never
            self.state.save(self.state_path)  # 5.
            self.input_ends = {p: end for (topic, p), end in ends.items() if topic == self.settings.input_topic}
            self.last_round_s = time.time()
        return found

    def reset(self) -> None:
        """After a failed round: back to the saved state, read again from its positions by a new reader."""
        state = FollowState(**self._state_settings)
        state.load(self.state_path)
        with self.lock:
            self.state = state
        # New clients: after broker restarts, librdkafka clients once logged partitions and leaders they made
        # up ("leader-1827340288 not found in cache"), and then never again read one partition to its end,
        # or never again answered for its end offset.
        self._close_clients()
        self._open_clients()
        self._assignment = []
        self._judged_against = None

    def _open_clients(self) -> None:
        client = self.settings.kafka_client()
        self.reader = Consumer(self._reader_config)
        # Reads the pipeline group's committed offsets; never joins the group. Not read_committed (librdkafka's
        # default): that asks for stable offsets, which wait for every pending transactional offset commit,
        # and after a broker restart one can stay pending for minutes. Without it, a pending commit's offsets
        # are not shown yet: the offsets read are never ahead of what committed, which is all missing needs.
        self.group_offsets = Consumer({**client, "group.id": self.settings.app_id, "enable.auto.commit": False,
                                       "isolation.level": "read_uncommitted"})
        self.end_offsets = WatermarkReader(client, f"{self.settings.app_id}-reconcile-follow",
                                           timeout_s=OFFSETS_TIMEOUT_S)

    def _close_clients(self) -> None:
        self.reader.close()
        self.group_offsets.close()
        self.end_offsets.close()

    def _partitions(self) -> list[Partition]:
        metadata = self.reader.list_topics(timeout=OFFSETS_TIMEOUT_S)
        partitions = []
        for topic in self.topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, f"topic {topic!r} is not there yet"))
            partitions += [(topic, p) for p in sorted(described.partitions)]
        return partitions

    def _committed(self, partitions: list[Partition]) -> dict[Partition, int]:
        answers = self.group_offsets.committed([TopicPartition(t, p) for t, p in partitions], timeout=OFFSETS_TIMEOUT_S)
        return {(tp.topic, tp.partition): tp.offset for tp in answers if tp.error is None and tp.offset >= 0}

    def _offsets(self, partitions: list[Partition]) -> dict[Partition, PartitionOffsets]:
        offsets = read_offsets(self.end_offsets, partitions)
        if len(offsets) < len(partitions):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "the ends of some partitions could not be read"))
        return offsets

    def _read_up_to(self, ends: dict[Partition, int]) -> dict[Partition, list[Any]]:
        """Every committed record from the saved positions up to ``ends``, per partition."""
        positions = {tp: self.state.positions.get(tp[0], {}).get(tp[1]) for tp in ends}
        if set(ends) != set(self._assignment):
            self.reader.assign([TopicPartition(t, p,
                                               OFFSET_BEGINNING if positions[(t, p)] is None else positions[(t, p)])
                                for t, p in ends])
            self._assignment = list(ends)
            self._at_end = {}
        # A partition whose end-of-partition event already came for its end is read: librdkafka
        # sends one per end offset, and aborted records and commit markers move the end without records.
        waiting = {tp for tp, end in ends.items() if (positions[tp] or 0) < end and self._at_end.get(tp, -1) < end}
        records: dict[Partition, list[Any]] = defaultdict(list)
        past_end: set[Partition] = set()
        deadline = time.monotonic() + READ_TIMEOUT_S
        try:
            while waiting:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(waiting)} partitions not read to their end in {READ_TIMEOUT_S:.0f} s")
                for message in ready_records(self.reader, timeout=0.5):
                    tp = (message.topic(), message.partition())
                    if tp not in ends:
                        continue
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            raise KafkaException(error)
                        self._at_end[tp] = message.offset()
                        if message.offset() >= ends[tp]:
                            waiting.discard(tp)
                        continue
                    if message.offset() >= ends[tp]:
                        past_end.add(tp)
                        waiting.discard(tp)
                        continue
                    records[tp].append(message)
                    if message.offset() + 1 >= ends[tp]:
                        waiting.discard(tp)
            for tp in past_end:  # the next round reads them
                self.reader.seek(TopicPartition(tp[0], tp[1], ends[tp]))
                self._at_end.pop(tp, None)
        except BaseException:
            self._assignment = []  # the next round reads again from the saved positions
            raise
        return records

    def _judge(self, records: dict[Partition, list[Any]]) -> list[Difference]:
        s = self.settings
        found: list[Difference] = []
        for (topic, partition), messages in sorted(records.items(), key=lambda item: self.topics.index(item[0][0])):
            for message in messages:
                if topic == s.input_topic:
                    self.state.read_input(partition, message.offset(), message.value(), _read_at(message))
                elif topic == s.by_merchant_topic:
                    self.state.read_by_merchant(partition, message.offset(), message.value())
                elif not any(key == SENTINEL_HEADER for key, _ in message.headers() or ()):
                    found += self.state.read_total(message.value(), f"{topic}[{partition}]@{message.offset()}")
        return found

    def _report(self, found: list[Difference]) -> None:
        for difference in found:
            self.say(difference.line())
        if found and self.differences_path is not None:
            with self.differences_path.open("a") as out:
                for difference in found:
                    out.write(json.dumps({**asdict(difference), "round": self.state.rounds}) + "\n")

    # -- for ever --------------------------------------------------------------
    def run(self, check_s: float, stop: threading.Event) -> None:
        """A round every ``check_s`` seconds until ``stop`` is set; a failed round is retried at the next."""
        self.say(("resuming from " if self.resumed else "starting; state in ") + str(self.state_path))
        said = None
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.round()
                if (line := self.progress()) != said:  # a line when something moved, not every round
                    self.say(said := line)
            except (KafkaException, TimeoutError) as exc:
                log.warning("A reconcile round failed (the next one tries again): %s", exc)
                self.reset()
            except Exception:
                log.exception("A reconcile round failed (the next one tries again from the saved state)")
                self.reset()
            stop.wait(max(0.0, check_s - (time.monotonic() - started)))

    def progress(self) -> str:
        marks = self.state.watermarks()
        lag = sum(max(end - marks.get(p, 0), 0) for p, end in self.input_ends.items())
        counts = ", ".join(f"{kind} {self.state.differences[kind]:,}" for kind in KINDS)
        return (f"checked {self.state.checked_events:,} events; {self.state.waiting():,} wait for their update; "
                f"watermark lag {lag:,} records; differences: {counts}")


class FollowerMetrics(Collector):
    """The follower's Prometheus series, read from its state at each scrape."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower

    def collect(self) -> Iterator[Any]:
        with self.follower.lock:
            yield from self._series()

    def _series(self) -> Iterator[Any]:
        follower, state = self.follower, self.follower.state
        marks = state.watermarks()
        watermark = GaugeMetricFamily("faust_eos_reconciler_watermark",
                                      "Input offset below which every record has been checked", labels=["partition"])
        lag = GaugeMetricFamily("faust_eos_reconciler_lag_records",
                                "Input records past the watermark, as of the last round", labels=["partition"])
        for partition in sorted(follower.input_ends):
            watermark.add_metric([str(partition)], marks.get(partition, 0))
            lag.add_metric([str(partition)], max(follower.input_ends[partition] - marks.get(partition, 0), 0))
        yield watermark
        yield lag
        if follower.last_round_s is not None:
            yield GaugeMetricFamily("faust_eos_reconciler_last_check_timestamp_seconds",
                                    "When the last round succeeded (Unix time)", value=follower.last_round_s)
        differences = CounterMetricFamily("faust_eos_reconciler_differences",
                                          "Differences found, by kind (kept across restarts)", labels=["kind"])
        for kind in KINDS:
            differences.add_metric([kind], state.differences[kind])
        yield differences
        yield CounterMetricFamily("faust_eos_reconciler_checked_events", "Events checked as counted once",
                                  value=state.checked_events)
        yield CounterMetricFamily("faust_eos_reconciler_rounds", "Rounds that succeeded", value=state.rounds)
        yield GaugeMetricFamily("faust_eos_reconciler_waiting_events", "Valid input events waiting for their update",
                                value=state.waiting())


def serve_metrics(follower: Follower, port: int, address: str) -> None:
    registry = CollectorRegistry()
    registry.register(FollowerMetrics(follower))
    start_http_server(port, addr=address, registry=registry)


def _read_at(message: Any) -> float:
    """A record's timestamp in seconds, no later than now (what the dedup retention counts from)."""
    kind, stamp_ms = message.timestamp()
    now = time.time()
    return now if kind == TIMESTAMP_NOT_AVAILABLE or stamp_ms <= 0 else min(stamp_ms / 1000, now)
