"""What watches a fault run from outside: a read_committed verifier, ``reconcile --follow``'s metrics, and
the end's checks that no transaction was left open."""
from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from app.follow_state import KINDS
from app.kafka import CLIENT_LOG, producer_config
from app.reconcile import SENTINEL_HEADER
from config import Settings
from kafka_ops.offsets import READ_UNCOMMITTED, admin_end_offsets, read_offsets
from kafka_ops.records import ready_records
from tools.workers import Worker


class Verifier(threading.Thread):
    """A read_committed reader of the totals topic, running for the whole run."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(daemon=True)
        self.records = 0
        self._done = threading.Event()
        self._consumer = Consumer({
            **settings.kafka_client(),
            "group.id": f"{settings.app_id}-verifier",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": CLIENT_LOG,
        })
        # assigned, not subscribed: no group coordinator to lose when the broker restarts
        self._consumer.assign([TopicPartition(settings.totals_topic, p, OFFSET_BEGINNING)
                               for p in range(settings.partitions)])

    def run(self) -> None:
        # Without committed offsets, a restarted broker can make it read a partition
        # again from the start: count each (partition, offset) once.
        next_offset: dict[int, int] = {}
        while not self._done.is_set():
            for msg in ready_records(self._consumer, timeout=0.5, most=500):
                if not msg.error() and msg.offset() >= next_offset.get(msg.partition(), 0):
                    next_offset[msg.partition()] = msg.offset() + 1
                    self.records += 1
        self._consumer.close()

    def stop(self) -> None:
        self._done.set()
        self.join(10)


class FollowerView:
    """``reconcile --follow`` beside the run: its metrics, read over HTTP."""

    def __init__(self, follower: Worker) -> None:
        self.follower = follower

    def series(self) -> dict[str, float]:
        """Each series' value, summed over its labels; a difference count by ``differences:<kind>``."""
        status, body = self.follower.get("/metrics", timeout=10)
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                name = sample.name
                if name == "faust_eos_reconciler_differences_total":
                    name = f"differences:{sample.labels['kind']}"
                values[name] = values.get(name, 0.0) + sample.value
        return values

    def caught_up(self, since_epoch_s: float) -> bool:
        """Whether a round after ``since_epoch_s`` left every input event judged, up to the input's end."""
        try:
            values = self.series()
        except OSError:  # between a broker restart's retries, or not serving yet
            return False
        return (values.get("faust_eos_reconciler_last_check_timestamp_seconds", 0) > since_epoch_s
                and values.get("faust_eos_reconciler_lag_records") == 0
                and values.get("faust_eos_reconciler_waiting_events") == 0)

    def differences(self) -> dict[str, int]:
        """What it found, by kind; {} if it does not answer."""
        try:
            values = self.series()
        except OSError:
            return {}
        return {kind: int(values.get(f"differences:{kind}", 0)) for kind in KINDS}


def no_open_transactions(settings: Settings, admin: AdminClient) -> bool:
    """LSO equals the high watermark on every output and changelog partition."""
    topics = [t for t in admin.list_topics(timeout=30).topics if _is_pipeline_output(settings, t)]
    partitions = [(t, p) for t in topics for p in range(settings.partitions)]
    end_offsets = admin_end_offsets(admin, timeout_s=30)
    for _ in range(10):  # a commit in flight holds the LSO back for a moment
        if all(o.lso_lag == 0 for o in read_offsets(end_offsets, partitions).values()):
            return True
        time.sleep(1)
    return False


def _is_pipeline_output(settings: Settings, topic: str) -> bool:
    return topic in settings.output_topics or (topic.startswith(settings.app_id + "-") and topic.endswith("-changelog"))


def sentinels_only(settings: Settings, admin: AdminClient) -> bool:
    """Write a committed sentinel to every output partition; a read_committed reader
    positioned at the end must see exactly those sentinels and nothing else."""
    s = settings
    tps = [TopicPartition(t, p) for t in (s.totals_topic, s.windows_topic, s.dlq_topic) for p in range(s.partitions)]
    ends = admin_end_offsets(admin, timeout_s=30)(READ_UNCOMMITTED, [(tp.topic, tp.partition) for tp in tps])
    reader = Consumer({**s.kafka_client(), "group.id": f"{s.app_id}-sentinel",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    reader.assign([TopicPartition(topic, partition, end) for (topic, partition), end in ends.items()])
    producer = Producer(producer_config(s, **{"transactional.id": f"{s.app_id}-sentinel"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for tp in tps:
        producer.produce(tp.topic, key=b"sentinel", value=b"sentinel", partition=tp.partition,
                         headers=[(SENTINEL_HEADER, b"1")])
    producer.commit_transaction(30)
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(tps) and time.monotonic() < deadline:
        seen.extend(m.value() for m in reader.consume(100, timeout=0.5) if not m.error())
    extra = [m.value() for m in reader.consume(100, timeout=2.0) if not m.error()]
    reader.close()
    return len(seen) == len(tps) and not extra and all(v == b"sentinel" for v in seen)
