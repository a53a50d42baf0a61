"""Where a worker's time goes, seen from outside: its CPU by thread, and its event-loop thread sampled with py-spy.

The CPU of each of the worker's threads is read from ``/proc`` when sampling
starts and stops, and summed by kind of thread (:data:`THREAD_KINDS`): Python
runs one thread at a time, so the Python threads' sum is what bounds a worker.
py-spy samples the running worker's stacks (idle ones included) into a raw
file of ``frame;frame;... count`` lines. Of those, the
stacks of the main thread, where the worker's event loop runs, are summarised
two ways: by what the sampled frame's code belongs to (Faust, asyncio, JSON,
RocksDB, the layer, ...), and by the parts of the pipeline that enclose it
(each agent, the commit rounds, waiting for I/O).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

#: what the innermost Python frame of a sample belongs to, by the start of its file's path
#: (py-spy names frames ``Class.function (package/file.py:line)``); first match wins
OWNERS = (
    ("waiting for I/O (selectors)", "(selectors.py:"),
    ("the pipeline's agents (agents/)", "(agents/"),
    ("the exactly-once layer (faust_eos/)", "(faust_eos/"),
    ("Faust", "(faust/"),
    ("Faust's models (the code they generate)", "(<string>:"),
    ("mode (Faust's services)", "(mode/"),
    ("asyncio", "(asyncio/"),
    ("JSON codecs", "json"),
    ("Kafka clients (aiokafka, confluent-kafka)", "kafka/"),
    ("logging", "(logging/"),
    ("metrics (prometheus-client)", "(prometheus_client/"),
)
#: parts of the pipeline, by a function and its file: a sample counts for each part that encloses it
PARTS = (
    ("agent `ingest`", "ingest", "(agents/payments.py:"),
    ("agent `aggregate`", "aggregate", "(agents/payments.py:"),
    ("exactly_once commit rounds", "WorkerCommits.run", "(faust_eos/committing/commit.py:"),
    ("at_least_once commits", "Consumer.commit_to_group", "(faust_eos/consuming/consumer.py:"),
    ("Faust's fetching", "Consumer._drain_messages", "(faust/transport/consumer.py:"),
    ("waiting for I/O (selectors)", "EpollSelector.select", "(selectors.py:"),
)
#: the outermost frame of a stack sampled on the main thread, where the worker's event loop runs
#: (other threads start in ``Thread._bootstrap``)
MAIN_THREAD_ROOTS = ("_run_module_as_main ", "<module> ")
#: kinds of a worker's threads, by the start of the name the OS knows them by; first match wins, and the
#: process's first thread (its id is the process's) is the event loop's
THREAD_KINDS = (
    ("librdkafka's threads (C: the producers' and admin clients' I/O)", "rdk:"),
    ("RocksDB's threads (C: flushes and compactions)", "rocksdb:"),
    ("other Python threads (the consumer's fetching, the producers' calls)", ""),
)
EVENT_LOOP_THREAD = "event-loop thread (Python: agents, tables, commits)"


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds used so far by each thread of ``pid``: thread id -> (its OS name, seconds).
    Empty without ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        threads[int(tid)] = (name, (int(rest[11]) + int(rest[12])) / ticks)  # utime + stime
    return threads


def cpu_by_thread_kind(pid: int, before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                       seconds: float) -> dict[str, dict[str, float]]:
    """The CPU each kind of thread used between two :func:`thread_cpu` readings, ``seconds`` apart: per kind, its
    ``cores`` (CPU seconds per second) and its ``share`` of the process's CPU."""
    used: Counter[str] = Counter()
    for tid, (name, cpu) in after.items():
        kind = EVENT_LOOP_THREAD if tid == pid else next(k for k, prefix in THREAD_KINDS if name.startswith(prefix))
        used[kind] += cpu - before.get(tid, (name, 0.0))[1]
    total = sum(used.values())
    return {kind: {"cores": used[kind] / seconds if seconds > 0 else 0.0, "share": used[kind] / total if total else 0.0}
            for kind in [EVENT_LOOP_THREAD, *(k for k, _ in THREAD_KINDS)]}


def py_spy() -> Optional[str]:
    """The py-spy executable beside this Python, or on the PATH; None if neither."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Sampler:
    """py-spy recording one process until stopped."""

    def __init__(self, pid: int, out: Path, rate_hz: int = 100) -> None:
        self.pid = pid
        self.out = out
        self.rate_hz = rate_hz
        self._threads_before, self._started = thread_cpu(pid), time.monotonic()
        executable = py_spy()
        if executable is None:
            raise RuntimeError("py-spy is not installed (pip install py-spy, or scripts/setup)")
        self._errors = tempfile.TemporaryFile(mode="w+")
        self._process = subprocess.Popen(
            [executable, "record", "--pid", str(pid), "--rate", str(rate_hz), "--duration", "3600",
             "--format", "raw", "--output", str(out), "--idle"],
            # Not --nonblocking: without pausing the worker, samples of a busy thread are often cut
            # short (no root frame) or lost, while idle ones are whole: idle time was over-counted.
            stdout=subprocess.DEVNULL, stderr=self._errors, text=True,
        )

    def stop(self, timeout_s: float = 60.0) -> dict:
        """Stop sampling, and summarise what was sampled (:func:`summarise`) with the CPU each kind of thread
        used meanwhile (``threads``: :func:`cpu_by_thread_kind`). Raises RuntimeError if sampling failed."""
        threads = cpu_by_thread_kind(self.pid, self._threads_before, thread_cpu(self.pid),
                                     time.monotonic() - self._started)
        self._process.send_signal(signal.SIGINT)  # py-spy writes its file on an interrupt
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.close()
            raise RuntimeError(f"py-spy did not stop within {timeout_s:g} s") from None
        if not self.out.exists():
            self._errors.seek(0)
            raise RuntimeError(f"py-spy wrote no samples: {self._errors.read().strip()[-300:]}")
        self._errors.close()
        return {**summarise(self.out.read_text(), self.rate_hz), "threads": threads}

    def close(self) -> None:
        """Stop sampling at once, if it still runs; nothing is summarised."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._errors.close()


def summarise(raw: str, rate_hz: int) -> dict:
    """Shares of the event-loop thread's samples, by owner of the sampled code and by enclosing part."""
    owners: Counter[str] = Counter()
    parts: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames = stack.split(";")
        if not count_text.isdigit() or not frames[0].startswith(MAIN_THREAD_ROOTS):
            continue  # another thread's
        count = int(count_text)
        total += count
        owners[_owner(frames[-1])] += count
        for name, function, path in PARTS:
            if any(frame.startswith(f"{function} (") and path in frame for frame in frames):
                parts[name] += count
    share = (lambda n: n / total) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "seconds": total / rate_hz,
        "own": {name: share(n) for name, n in owners.most_common()},
        "within": {name: share(parts[name]) for name, _, _ in PARTS},
    }


def _owner(frame: str) -> str:
    for name, marker in OWNERS:
        if marker in frame:
            return name
    return "other"
