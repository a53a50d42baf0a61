"""Running an app of the corpus: ordinary Faust code, written as Faust's documentation teaches it, on ``eos://``.

Each app is a module's source with a few placeholders (its id, the broker, its
data directory, its web port and its topics). It runs as ``faust worker``
processes, as its authors would run it (one, or several in one group, each in a
directory of its own), and is checked from outside by a ``read_committed`` reader.
"""
from __future__ import annotations

import json
import signal
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
    broker_session_timeout=10,
    broker_heartbeat_interval=1,
    web_port={web_port},
)
'''
PARTITIONS = 3

#: every app whose workers were started, so that a test that failed leaves none running (:func:`kill_workers_left`)
_STARTED: list["CorpusApp"] = []


def kill_workers_left() -> None:
    """Kill the workers a test left running (it failed before it stopped them)."""
    while _STARTED:
        corpus = _STARTED.pop()
        for index, worker in corpus.workers.items():
            if worker.poll() is None:
                corpus.kill(index)


class CorpusApp:
    """One app of the corpus, its topics (named ``<name>-<topic>-<suffix>``) and its worker processes.

    Worker 0 runs in ``tmp_path``, each other worker ``i`` in ``tmp_path/worker-i``, with its own data
    directory and web port.
    """

    def __init__(self, kafka: Settings, tmp_path: Path, name: str, body: str, topics: Iterable[str],
                 created_later: Iterable[str] = ()) -> None:
        """Creates the app's ``topics`` but those ``created_later`` (by :meth:`create_topics`)."""
        self.kafka = kafka
        self.dir = tmp_path
        self.body = body
        suffix = uuid.uuid4().hex[:6]
        self.app_id = f"corpus-{name}-{suffix}"
        #: what the app's own topics' names start with (those Faust makes for it start with its id)
        self.topic_prefix = f"corpus-{name}-"
        self.topics = {topic: f"{self.topic_prefix}{topic}-{suffix}" for topic in topics}
        later = set(created_later)
        self.create_topics(*(topic for topic in self.topics if topic not in later))
        self.workers: dict[int, subprocess.Popen] = {}

    def create_topics(self, *topics: str) -> None:
        client = admin(self.kafka)  # kept until the topics exist: its futures fail once it is collected
        futures = client.create_topics(
            [NewTopic(self.topics[t], num_partitions=PARTITIONS, replication_factor=1) for t in topics])
        for future in futures.values():
            future.result(30)

    def worker_dir(self, index: int) -> Path:
        return self.dir if index == 0 else self.dir / f"worker-{index}"

    def log_of(self, index: int) -> Path:
        return self.worker_dir(index) / "worker.log"

    @property
    def log(self) -> Path:
        """Worker 0's log."""
        return self.log_of(0)

    def start(self, index: int = 0) -> None:
        directory = self.worker_dir(index)
        module = directory / "corpus_app.py"
        if not module.exists():
            directory.mkdir(parents=True, exist_ok=True)
            module.write_text(
                (HEADER + self.body).format(app_id=self.app_id, bootstrap=self.kafka.bootstrap_servers,
                                            datadir=directory / "data", partitions=PARTITIONS, web_port=free_port(),
                                            **{f"{topic}_topic": full for topic, full in self.topics.items()}))
        if self not in _STARTED:
            _STARTED.append(self)
        with open(self.log_of(index), "ab") as out:
            self.workers[index] = subprocess.Popen(
                [sys.executable, "-m", "faust", "-A", "corpus_app", "worker", "-l", "info"],
                cwd=directory, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 180, index: int = 0) -> None:
        log = self.log_of(index)
        wait_for(lambda: "Worker ready" in log.read_text(), timeout, what=f"the worker ready (log: {log})")

    def stop(self) -> Optional[int]:
        """SIGTERM each running worker and wait: each commits what it holds and exits; the first non-zero
        exit code, else 0 (None if no worker ever ran).

        Checks first that each ran on the library: its transactional id claimed, and
        its topics and tables of Faust's own classes adopted (:mod:`faust_eos.short_paths.adoption`).
        """
        codes = [self._stop(index) for index in sorted(self.workers)]
        return next((code for code in codes if code != 0), 0) if codes else None

    def _stop(self, index: int) -> Optional[int]:
        worker, log = self.workers[index], self.log_of(index)
        if worker.poll() is not None:
            return worker.returncode
        text = log.read_text()
        assert "Claimed corpus-" in text, f"the app did not run on the eos:// transport (log: {log})"
        assert "take faust-eos's short paths" in text, f"the app's topics were not adopted (log: {log})"
        worker.terminate()
        try:
            return worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            return worker.wait(30)

    def kill(self, index: int = 0) -> None:
        """SIGKILL: no shutdown, no final commit."""
        self.workers[index].kill()
        self.workers[index].wait(30)

    def pause(self, index: int) -> None:
        """SIGSTOP: the worker neither works nor heartbeats until :meth:`resume`."""
        self.workers[index].send_signal(signal.SIGSTOP)

    def resume(self, index: int) -> None:
        self.workers[index].send_signal(signal.SIGCONT)

    def produce(self, topic: str, records: Iterable[tuple[Any, ...]], rate: Optional[float] = None) -> int:
        """Produce ``(key, value, timestamp_ms)`` records, or ``(key, value, timestamp_ms, headers)``, to one of
        the app's topics (``rate`` a second, or as fast as it goes); how many."""
        producer = Producer(producer_config(self.kafka))
        started = time.monotonic()
        count = 0
        for key, value, timestamp_ms, *headers in records:
            if rate is not None:
                time.sleep(max(0.0, started + count / rate - time.monotonic()))
            options: dict[str, Any] = {} if timestamp_ms is None else {"timestamp": timestamp_ms}
            if headers:
                options["headers"] = headers[0]
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

        wait_for(check, timeout, interval=1.0,
                 what=f"{what} (logs: {', '.join(str(self.log_of(i)) for i in self.workers)})")
        return found
