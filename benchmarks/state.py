"""``python -m benchmarks.state``: does a worker's state stay flat in a run longer than its retention?

One worker under a steady load, with a short dedup retention and short
windows, for several retentions. Every few seconds it samples the events
processed, each table's keys (``faust_eos_table_keys``) and the size of the
worker's data directory (RocksDB files, with their write-ahead log). Without
the sweeps the dedup and window tables would grow with every event; with them
they level off after one retention. Disk follows later: a deleted key leaves
RocksDB's files only once its write buffer (``--write-buffer-mb``, per table
partition) has been flushed and the flushed files compacted.

The load has no repeats: after a retention this short, the pipeline counts a
repeat again, where ``reconcile`` would expect it dropped.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import config
from app.loadgen import LoadSpec
from benchmarks.recovery import disk_mb, samples
from tools import broker
from tools.run import PipelineRun
from tools.workers import wait_for

TABLES = ("seen-events", "merchant-window-totals", "merchant-totals", "stream-times")


def sample(worker: Any, started: float) -> dict[str, Any]:
    keys = {table: 0 for table in TABLES}
    for s in samples(worker, "faust_eos_table_keys"):
        keys[s.labels["table"]] = keys.get(s.labels["table"], 0) + int(s.value)
    events = sum(int(s.value) for s in samples(worker, "faust_eos_events_in_total") if s.labels["agent"] == "ingest")
    return {"elapsed_s": round(time.monotonic() - started, 1), "events": events, "keys": keys,
            "disk_mb": round(disk_mb(Path(worker.env["DATA_DIR"])), 1)}


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    name = f"state-{uuid.uuid4().hex[:6]}"
    run = PipelineRun(name, workdir / name, DEDUP_RETENTION_DAYS=str(args.retention_s / 86_400),
                      WINDOW_SECONDS=str(args.window_s), TABLE_WRITE_BUFFER_MB=str(args.write_buffer_mb))
    load = LoadSpec(count=int(args.rate * args.minutes * 60), rate=args.rate, seed=7, duplicate_rate=0, bad_rate=0)
    rows = []
    try:
        worker = run.add_worker()
        wait_for(worker.ready, timeout=300, what="the worker's /ready")
        producing = threading.Thread(target=run.produce, args=(load,), daemon=True)
        started = time.monotonic()
        producing.start()
        print(f"{'elapsed':>8} {'events':>9} " + " ".join(f"{t:>22}" for t in TABLES) + f" {'disk MiB':>9}")
        while producing.is_alive():
            producing.join(timeout=args.every_s)
            row = sample(worker, started)
            rows.append(row)
            print(f"{row['elapsed_s']:>7}s {row['events']:>9,} "
                  + " ".join(f"{row['keys'][t]:>22,}" for t in TABLES) + f" {row['disk_mb']:>9}", flush=True)
        report = run.reconcile(wait_s=120)
        print("reconcile:", "OK" if report["ok"] else f"FAILED {report['problems']}")
    finally:
        run.stop_all()
        shutil.rmtree(workdir / name, ignore_errors=True)
    return {"retention_s": args.retention_s, "window_s": args.window_s, "rate": args.rate,
            "write_buffer_mb": args.write_buffer_mb,
            "reconcile_ok": report["ok"], "late_events": report["late_events"],
            "counted_events": report["counted_events"], "samples": rows}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["samples"]
    elapsed = [r["elapsed_s"] for r in rows]
    fig, (keys_ax, disk_ax) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    for table in ("seen-events", "merchant-window-totals"):
        keys_ax.plot(elapsed, [r["keys"][table] for r in rows], label=f"{table} keys")
    keys_ax.plot(elapsed, [r["events"] for r in rows], "--", color="grey", label="events processed")
    keys_ax.axvline(result["retention_s"], color="black", linewidth=0.8, label="one retention")
    keys_ax.set_ylabel("count")
    keys_ax.legend()
    disk_ax.plot(elapsed, [r["disk_mb"] for r in rows], color="tab:red")
    disk_ax.set_ylabel("data directory (MiB)")
    disk_ax.set_xlabel("seconds of load")
    fig.suptitle(f"state under a {result['rate']:g}/s load, dedup retention {result['retention_s']:g} s, "
                 f"{result['window_s']} s windows, {result['write_buffer_mb']:g} MiB write buffers")
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.state", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="length of the load (default 5)")
    parser.add_argument("--retention-s", type=float, default=60.0, help="dedup retention in seconds (default 60)")
    parser.add_argument("--window-s", type=int, default=10, help="window size in seconds (default 10)")
    parser.add_argument("--rate", type=float, default=200.0, help="events per second (default 200)")
    parser.add_argument("--write-buffer-mb", type=float, default=config.settings.table_write_buffer_mb,
                        help="RocksDB write buffer per table partition, MiB (default: TABLE_WRITE_BUFFER_MB, 64)")
    parser.add_argument("--every-s", type=float, default=5.0, help="seconds between samples (default 5)")
    parser.add_argument("--json", dest="json_path", help="write the samples here")
    parser.add_argument("--plot", dest="plot_path", help="draw keys and disk over time here (PNG; needs matplotlib)")
    args = parser.parse_args(argv)
    if min(args.minutes, args.retention_s, args.window_s, args.rate, args.every_s, args.write_buffer_mb) <= 0:
        parser.error("--minutes, --retention-s, --window-s, --rate, --write-buffer-mb and --every-s must be positive")
    settings = config.load()
    if settings.use_local_broker:
        broker.ensure_running(settings)
    result = measure(args, config.REPO_ROOT / ".data" / "state")
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(result, indent=2))
        print(f"samples written to {args.json_path}")
    if args.plot_path:
        plot(result, Path(args.plot_path))
        print(f"plot written to {args.plot_path}")
    return 0 if result["reconcile_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
