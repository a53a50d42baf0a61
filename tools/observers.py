"""What watches a fault run from outside: a read_committed verifier, and ``reconcile --follow``'s metrics."""
from __future__ import annotations

import threading

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from app.follow_state import KINDS
from app.kafka import CLIENT_LOG
from config import Settings
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
