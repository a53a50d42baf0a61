"""``python -m benchmarks.recovery``: what a worker restores, and how long it takes, as its tables grow.

For each table size it fills the dedup table's changelog (``seen-events``)
with that many keys, then measures one worker through four starts:

* ``fresh``: no local state, the whole changelog is read;
* ``clean restart``: the same data directory after a clean stop;
* ``SIGKILL restart``: the same data directory after SIGKILL;
* ``rebalance``: a second worker, with no local state, joins; the first keeps
  half its partitions.

Per start: seconds to ``/ready`` (for the rebalance, from the second worker's
start: ``kept``, until the first worker serves its remaining partitions again;
``joined``, until the second is ready), changelog records restored (``kept``:
for the partitions the first worker kept), peak RSS of the worker, and the
size of its data directory. No load runs meanwhile, so the records a
restart restores are those its checkpoints lack.

With ``--takeover``, it also measures a takeover, with and without standby
replicas: two workers share the table, one is killed (SIGKILL), and the row
gives the seconds from the kill until the survivor serves every partition,
and the changelog records it restored for them as an active.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

import config
from agents.models import SeenEvent
from app.kafka import ensure_topics, producer_config
from benchmarks.measure import peak_rss_mb
from tools import broker
from tools.run import PipelineRun
from tools.workers import Worker, wait_for

READY_TIMEOUT_S = 3_600.0  # bounds a hang; ten million keys restore for many minutes
RESTORED = "faust_eos_changelog_records_restored_total"
TABLE = "seen-events"


def fill_changelog(run: PipelineRun, keys: int) -> None:
    """Write ``keys`` distinct dedup entries to the table's changelog, spread over its partitions.

    Keys and values as the table writes them: the event id and a ``SeenEvent``, both JSON.
    """
    settings = run.settings
    topic = f"{settings.app_id}-{TABLE}-changelog"
    ensure_topics(settings, [topic])
    producer = Producer(producer_config(settings, **{"linger.ms": 50, "batch.num.messages": 10_000}))
    value = SeenEvent(fingerprint="m|c|100|0.0", first_seen=time.time()).dumps()
    for i in range(keys):
        while True:
            try:
                producer.produce(topic, key=json.dumps(f"evt-{i:010d}").encode(), value=value,
                                 partition=i % settings.partitions)
                break
            except BufferError:
                producer.poll(0.5)
        if i % 100_000 == 0:
            producer.poll(0)
            print(f"  filling {topic}: {i:,}/{keys:,}", end="\r", flush=True)
    producer.flush(120)
    print(f"  filling {topic}: {keys:,}/{keys:,} done")


def samples(worker: Worker, name: str) -> list[Any]:
    _, body = worker.get("/metrics")
    return [s for f in text_string_to_metric_families(body.decode()) for s in f.samples if s.name == name]


def restored_by_partition(worker: Worker) -> dict[str, int]:
    """Changelog records the worker restored as an active, per table partition number, all tables together."""
    counts: dict[str, int] = {}
    for sample in samples(worker, RESTORED):
        if sample.labels.get("kind") == "active":
            partition = sample.labels["partition"]
            counts[partition] = counts.get(partition, 0) + int(sample.value)
    return counts


def input_partitions(worker: Worker) -> set[str]:
    """The input partitions the worker owns (table partitions have the same numbers)."""
    return {s.labels["partition"] for s in samples(worker, "faust_eos_consumer_lag_records")}


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def row(label: str, took_s: float, records: int, worker: Worker) -> dict[str, Any]:
    result = {"start": label, "to_ready_s": round(took_s, 1), "records_restored": records,
              "peak_rss_mb": round(peak_rss_mb(worker.pid), 1),
              "disk_mb": round(disk_mb(Path(worker.env["DATA_DIR"])), 1)}
    print(f"  {label:16} {result['to_ready_s']:>7} s to /ready  {records:>10,} records restored  "
          f"{result['peak_rss_mb']:>7} MiB peak RSS  {result['disk_mb']:>7} MiB on disk", flush=True)
    return result


def started(run: PipelineRun, label: str, **env: str) -> tuple[Worker, dict[str, Any]]:
    begun = time.monotonic()
    worker = run.add_worker(**env)
    wait_for(worker.ready, timeout=READY_TIMEOUT_S, interval=0.2, what=f"{label}: /ready")
    return worker, row(label, time.monotonic() - begun, sum(restored_by_partition(worker).values()), worker)


def measure(keys: int, workdir: Path) -> list[dict[str, Any]]:
    """The four starts for a table of ``keys`` keys, one row each."""
    name = f"recovery-{keys}-{uuid.uuid4().hex[:6]}"
    run = PipelineRun(name, workdir / name)
    print(f"{keys:,} keys ({name})")
    fill_changelog(run, keys)
    rows = []
    try:
        worker, result = started(run, "fresh")
        rows.append(result)
        data_dir = worker.env["DATA_DIR"]
        if worker.stop() != 0:
            raise RuntimeError("the worker did not stop cleanly")
        worker, result = started(run, "clean restart", DATA_DIR=data_dir)
        rows.append(result)
        worker.kill()
        worker, result = started(run, "SIGKILL restart", DATA_DIR=data_dir)
        rows.append(result)

        before = restored_by_partition(worker)
        begun = time.monotonic()
        joining = run.add_worker()
        kept_ready_at: list[float] = []

        def settled() -> bool:
            if not kept_ready_at and len(input_partitions(worker)) < run.settings.partitions and worker.ready():
                kept_ready_at.append(time.monotonic())
            return bool(kept_ready_at) and joining.ready()

        wait_for(settled, timeout=READY_TIMEOUT_S, interval=0.2, what="rebalance: both workers /ready")
        joined_s = time.monotonic() - begun
        after = restored_by_partition(worker)
        kept = input_partitions(worker)
        rows.append(row("rebalance, kept", kept_ready_at[0] - begun,
                        sum(after.get(p, 0) - before.get(p, 0) for p in kept), worker))
        rows.append(row("rebalance, joined", joined_s, sum(restored_by_partition(joining).values()), joining))
    finally:
        run.stop_all()
        shutil.rmtree(workdir / name, ignore_errors=True)
    return [{"keys": keys, **result} for result in rows]


def takeover(keys: int, standby_replicas: int, workdir: Path) -> dict[str, Any]:
    """Kill one of two workers sharing a table of ``keys`` keys; time the survivor's takeover."""
    name = f"takeover-{keys}-{standby_replicas}-{uuid.uuid4().hex[:6]}"
    run = PipelineRun(name, workdir / name, STANDBY_REPLICAS=str(standby_replicas))
    label = f"takeover, {standby_replicas} standby"
    print(f"{keys:,} keys, {label} ({name})")
    fill_changelog(run, keys)
    try:
        killed, survivor = run.add_worker(), run.add_worker()
        # settled: both ready, the partitions split, and a standby has copied the other's partitions
        wait_for(lambda: killed.ready() and survivor.ready()
                 and len(input_partitions(survivor)) < run.settings.partitions
                 and sum(int(s.value) for s in samples(survivor, RESTORED)) >= (keys if standby_replicas else 0),
                 timeout=READY_TIMEOUT_S, interval=0.5, what=f"{label}: two workers settled")
        before = restored_by_partition(survivor)
        begun = time.monotonic()
        killed.kill()
        wait_for(lambda: len(input_partitions(survivor)) == run.settings.partitions and survivor.ready(),
                 timeout=READY_TIMEOUT_S, interval=0.2, what=f"{label}: the survivor serving every partition")
        after = restored_by_partition(survivor)
        return {"keys": keys, **row(label, time.monotonic() - begun,
                                    sum(n - before.get(p, 0) for p, n in after.items()), survivor)}
    finally:
        run.stop_all()
        shutil.rmtree(workdir / name, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recovery", description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, action="append", help="table size; repeat for several (default 1000000)")
    parser.add_argument("--takeover", action="store_true",
                        help="also time a takeover after SIGKILL, without and with one standby replica")
    parser.add_argument("--json", dest="json_path", help="write the rows here")
    args = parser.parse_args(argv)
    sizes = args.keys or [1_000_000]
    if any(n <= 0 for n in sizes):
        parser.error("--keys must be positive")
    settings = config.load()
    if settings.use_local_broker:
        broker.ensure_running(settings)
    workdir = config.REPO_ROOT / ".data" / "recovery"
    rows = [r for keys in sizes for r in measure(keys, workdir)]
    if args.takeover:
        rows += [takeover(keys, standby, workdir) for keys in sizes for standby in (0, 1)]
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(rows, indent=2))
        print(f"rows written to {args.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
