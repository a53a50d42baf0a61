"""The fault harness as the operator after a broker restart: it writes the markers the broker lost.

Kafka 4.4.0 can finish a transaction after a restart without writing its markers
on some partitions (docs/limitations.md); those partitions then hold it
open for good, and the pipeline waits behind them. An operator mends that with
``faust -A app lost-markers --write``; :class:`MarkerMender` does the same during a
fault run, from the first broker restart on, and keeps what it wrote for the
run's report. It writes only what the coordinator's log decided
(:mod:`kafka_ops.lost_markers`), so it cannot hide a transaction the layer left
open: the coordinator would still have that one open. A committed transaction the
broker tore (it aborted part of it with the producer's next transaction) is aborted
whole, or, if part of it is committed, left open and reported.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from config import Settings
from kafka_ops.lost_markers import GROUP_OFFSETS, find_lost_markers, write_lost_markers
from kafka_ops.transaction_requests import TransactionToolError
from kafka_ops.transactions import topic_names
from kafka_ops.wire import KafkaWireError
from kafka_ops.wire_security import cluster as wire_cluster

CHECK_S = 10.0
log = logging.getLogger(__name__)


class MarkerMender(threading.Thread):
    """Every :data:`CHECK_S`, writes the lost markers on the run's topics and the group offsets."""

    def __init__(self, settings: Settings, admin: Callable[[], AdminClient], started: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(daemon=True, name="marker-mender")
        self.settings = settings
        self.admin = admin  # the harness's current admin client: it renews it after each broker restart
        self.started = started  # the load's start, for the times in :attr:`written`
        self.clock = clock
        self.written: list[str] = []  # one line per marker written (or left open, torn), with its time into the run
        self._torn_reported: set[str] = set()
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(CHECK_S):
            self.mend_once()

    def stop(self, last_check: bool = True) -> None:
        """Stop checking; the harness asks for ``last_check`` before it judges the run."""
        self._done.set()
        if self.is_alive():
            self.join()
        if last_check:
            self.mend_once()

    def mend_once(self) -> None:
        admin = self.admin()
        try:
            client = self.settings.kafka_client()  # may read a password file: an OSError waits for the next round
            with wire_cluster(client) as cluster:
                found = find_lost_markers(cluster, admin, client, self._topics(admin))
                if found.lost:
                    write_lost_markers(cluster, admin, found.lost)
        except (TransactionToolError, KafkaWireError, KafkaException, OSError) as exc:
            log.info("lost markers not checked (the next round tries again): %s", exc)
            return
        at = self.clock() - self.started
        self.written += [f"t={at:.0f}s {marker.describe()}" for marker in found.lost]
        for marker in found.torn:  # left open, so found again every round: reported once
            line = f"left open, torn past mending: {marker.describe()}"
            if line not in self._torn_reported:
                self._torn_reported.add(line)
                self.written.append(f"t={at:.0f}s {line}")

    def _topics(self, admin: AdminClient) -> list[str]:
        prefixes = (self.settings.topic_prefix, self.settings.app_id + "-")
        return sorted(t for t in topic_names(admin) if t.startswith(prefixes) or t == GROUP_OFFSETS)
