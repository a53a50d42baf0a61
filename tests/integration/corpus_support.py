"""Running an app of the corpus: ordinary Faust code, written as Faust's documentation teaches it, on ``eos://``.

Each app is a module's source with a few placeholders (its id, the broker, its
data directory, its web port and its topics). It runs as a ``faust worker``
process of its own, as its authors would run it, and is checked from outside by
a ``read_committed`` reader.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Optional

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from app.kafka import admin, producer_config
from app.reconcile import read_committed
from config import Settings
from tools.workers import free_port, wait_for

#: the settings every app of the corpus starts with: an ordinary app's, with the two URLs of faust-eos
HEADER = '''
import faust

app = faust.App(
    "{app_id}",
    broker="eos://{bootstrap}",
    store="eos-rocksdb://",
    processing_guarantee="exactly_once",
    datadir="{datadir}",
    topic_partitions={partitions},
    topic_replication_factor=1,
    broker_commit_interval=0.5,
    web_port={web_port},
)
'''
PARTITIONS = 3


class CorpusApp:
    """One app of the corpus, its topics (named ``<name>-<topic>-<suffix>``) and its worker process."""

    def __init__(self, kafka: Settings, tmp_path: Path, name: str, body: str, topics: Iterable[str]) -> None:
        self.kafka = kafka
        self.dir = tmp_path
        suffix = uuid.uuid4().hex[:6]
        self.topics = {topic: f"corpus-{name}-{topic}-{suffix}" for topic in topics}
        client = admin(kafka)  # kept until the topics exist: its futures fail once it is collected
        futures = client.create_topics(
            [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in self.topics.values()])
        for future in futures.values():
            future.result(30)
        (tmp_path / "corpus_app.py").write_text(
            (HEADER + body).format(app_id=f"corpus-{name}-{suffix}", bootstrap=kafka.bootstrap_servers,
                                   datadir=tmp_path / "data", partitions=PARTITIONS, web_port=free_port(),
                                   **{f"{topic}_topic": full for topic, full in self.topics.items()}))
        self.log = tmp_path / "worker.log"
        self.worker: Optional[subprocess.Popen] = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.worker = subprocess.Popen([sys.executable, "-m", "faust", "-A", "corpus_app", "worker", "-l", "info"],
                                           cwd=self.dir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 180) -> None:
        wait_for(lambda: "Worker ready" in self.log.read_text(), timeout, what=f"the worker ready (log: {self.log})")

    def stop(self) -> Optional[int]:
        """SIGTERM and wait: the worker commits what it holds and exits (its exit code).

        Checks first that it ran on the library: its transactional id claimed, and
        its topics and tables of Faust's own classes adopted (:mod:`faust_eos.adoption`).
        """
        if self.worker is None or self.worker.poll() is not None:
            return None if self.worker is None else self.worker.returncode
        text = self.log.read_text()
        assert "Claimed corpus-" in text, f"the app did not run on the eos:// transport (log: {self.log})"
        assert "take faust-eos's short paths" in text, f"the app's topics were not adopted (log: {self.log})"
        self.worker.terminate()
        try:
            return self.worker.wait(60)
        except subprocess.TimeoutExpired:
            self.worker.kill()
            return self.worker.wait(30)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final commit."""
        assert self.worker is not None
        self.worker.kill()
        self.worker.wait(30)

    def produce(self, topic: str, records: Iterable[tuple[Optional[bytes], bytes, Optional[int]]],
                rate: Optional[float] = None) -> int:
        """Produce ``(key, value, timestamp_ms)`` records to one of the app's topics (``rate`` a second, or as
        fast as it goes); how many."""
        producer = Producer(producer_config(self.kafka))
        started = time.monotonic()
        count = 0
        for key, value, timestamp_ms in records:
            if rate is not None:
                time.sleep(max(0.0, started + count / rate - time.monotonic()))
            options: dict[str, Any] = {} if timestamp_ms is None else {"timestamp": timestamp_ms}
            while True:
                try:
                    producer.produce(self.topics[topic], key=key, value=value, **options)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            count += 1
        assert producer.flush(60) == 0, "the input was not all written"
        return count

    def committed(self, topic: str) -> list[Any]:
        """Every committed record of one of the app's topics, JSON-decoded, in partition then offset order."""
        return [json.loads(record.value) for record in read_committed(self.kafka, self.topics[topic])]

    def wait_for_output(self, topic: str, done: Any, timeout: float, what: str) -> list[Any]:
        """The committed records of ``topic`` once ``done(records)`` holds."""
        found: list[Any] = []

        def check() -> bool:
            found[:] = self.committed(topic)
            return bool(done(found))

        wait_for(check, timeout, interval=1.0, what=f"{what} (log: {self.log})")
        return found
