"""Measuring from outside: what a read_committed reader sees and when, LSO lag, CPU and memory."""
from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

from confluent_kafka import Consumer, TopicPartition

from app.kafka import admin
from config import Settings
from kafka_ops.offsets import admin_end_offsets, read_offsets
from kafka_ops.records import ready_records

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class OutputWatcher(threading.Thread):
    """A read_committed reader of one output topic, noting when each update became visible.

    Output records carry the ``event_id`` that caused them; the first time an
    event_id is seen is when that event's update became visible.
    """

    def __init__(self, settings: Settings, topic: str) -> None:
        super().__init__(name=f"watch-{topic}", daemon=True)
        self.settings = settings
        self.topic = topic
        self.visible_at: dict[str, float] = {}  # event_id -> wall time first seen
        self.arrivals: list[tuple[float, int]] = []  # (wall time, partition) of every record
        self.by_seed: Counter[str] = Counter()  # distinct event_ids per load seed
        self.records = 0
        self._done = threading.Event()
        self.error: Optional[str] = None

    def run(self) -> None:
        consumer = Consumer({
            **self.settings.kafka_client(),
            "group.id": f"{self.settings.app_id}-bench-watch",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 20,
        })
        try:
            partitions = wait_for_partitions(consumer, self.topic)
            consumer.assign([TopicPartition(self.topic, p, 0) for p in partitions])
            while not self._done.is_set():
                messages = ready_records(consumer, timeout=0.1)
                now = time.time()
                for msg in messages:
                    if msg.error():
                        self.error = msg.error().str()
                        continue
                    self.records += 1
                    self.arrivals.append((now, msg.partition()))
                    event_id = json.loads(msg.value())["event_id"]
                    if event_id not in self.visible_at:
                        self.visible_at[event_id] = now
                        self.by_seed[event_id.split("-", 1)[0]] += 1
        except Exception as exc:  # reported by the run, which then fails loudly
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            consumer.close()

    def stop(self) -> None:
        self._done.set()
        self.join(10)

    def wait_for_seed(self, seed: int, count: int, timeout: float, progress=None) -> None:
        """Block until ``count`` distinct events of load ``seed`` are visible."""
        deadline = time.monotonic() + timeout
        while self.by_seed[str(seed)] < count:
            if self.error:
                raise RuntimeError(f"output reader failed: {self.error}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"only {self.by_seed[str(seed)]:,} of {count:,} events of load {seed} visible after {timeout:.0f} s"
                )
            if progress:
                progress(self.by_seed[str(seed)], count)
            time.sleep(0.1)


def wait_for_partitions(consumer: Consumer, topic: str, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is not None and metadata.error is None and metadata.partitions:
            return sorted(metadata.partitions)
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no partitions")
        time.sleep(0.2)


class LsoSampler(threading.Thread):
    """Samples high watermark and LSO of every partition of ``topic`` (:func:`kafka_ops.offsets.read_offsets`).

    Lag in records is high watermark - LSO. Lag in time is how long the record
    at the LSO has been waiting: now minus the first sample whose high
    watermark was already past that offset (so it is exact to one interval).
    """

    def __init__(self, settings: Settings, topic: str, partitions: int, interval_s: float = 0.25) -> None:
        super().__init__(name=f"lso-{topic}", daemon=True)
        self.topic = topic
        self.partitions = partitions
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self._end_offsets = admin_end_offsets(admin(settings), timeout_s=10)
        self._history: dict[int, list[tuple[float, int]]] = defaultdict(list)  # partition -> (t, hw)
        self._done = threading.Event()

    def sample(self) -> list[dict]:
        now = time.time()
        offsets = read_offsets(self._end_offsets, [(self.topic, p) for p in range(self.partitions)])
        rows = []
        for (_, partition), read in sorted(offsets.items()):
            hw, lso = read.high_watermark, read.last_stable_offset
            history = self._history[partition]
            history.append((now, hw))
            waiting_since = next((t for t, seen_hw in history if seen_hw > lso), now)
            rows.append({"t": now, "partition": partition, "hw": hw, "lso": lso, "lag": hw - lso,
                         "lag_ms": (now - waiting_since) * 1000})
        self.samples.extend(rows)
        return rows

    def run(self) -> None:
        while not self._done.is_set():
            started = time.monotonic()
            try:
                self.sample()
            except Exception:  # a slow answer on a busy machine: skip this sample
                pass
            self._done.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self) -> None:
        self._done.set()
        self.join(15)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of a live process (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def commit_rounds(web_port: int, since: float, until: float) -> list[list[float]]:
    """A worker's commit rounds ``[end, ms, partitions]`` that ended within [since, until]."""
    with urllib.request.urlopen(f"http://localhost:{web_port}/commits/", timeout=10) as response:
        rounds = json.load(response)["rounds"]
    return [r for r in rounds if since <= r[0] <= until]


def machine() -> dict:
    """Cores, memory and CPU model of this machine."""
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        "unknown",
    )
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    return {"cores": os.cpu_count(), "memory_gib": round(mem_kb / 1024 / 1024, 1), "cpu_model": model,
            "load_average_at_start": list(os.getloadavg())}
