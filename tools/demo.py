"""The main job, end to end on the local broker: ``python -m tools.demo``.

Starts the broker (or uses ``KAFKA_BOOTSTRAP_SERVERS``), produces a demo load
with upstream duplicates and bad records, runs ``faust -A app worker`` on it,
waits for the outputs, prints the merchant totals and the reconcile verdict,
and stops the worker. Each run uses its own topics and consumer group, so runs
never see each other's data.
"""
from __future__ import annotations

import argparse
import sys
import time

import config
from app import loadgen
from app.reconcile import summary
from config import GUARANTEES, REPO_ROOT
from tools import broker
from tools.run import PipelineRun
from tools.workers import Worker


def run(count: int, guarantee: str, workers: int, seed: int, timeout_s: float) -> int:
    base = config.load()
    if base.use_local_broker:
        took = broker.ensure_running(base)
        print(f"broker ready ({took:.1f} s)")
    name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    run = PipelineRun(name, REPO_ROOT / ".data" / name, guarantee=guarantee)

    print(f"producing {count:,} events (seed {seed}) to {run.settings.input_topic}")
    load = run.produce(loadgen.LoadSpec(count=count, seed=seed), progress=True)
    print("  " + ", ".join(f"{kind} {n:,}" for kind, n in load.by_kind.most_common()))

    print(f"starting {workers} worker(s), processing_guarantee={guarantee}; logs in {run.run_dir}")
    for _ in range(workers):
        run.add_worker()
    try:
        report = run.reconcile(timeout_s, on_retry=lambda r: _progress(r, run.workers))
    finally:
        exits = run.stop_all()
    print()
    _print_totals(report)
    print(summary(report))
    if report["output_span_s"]:
        print(f"throughput: {report['counted_events'] / report['output_span_s']:,.0f} events/s "
              f"({report['counted_events']:,} aggregated in {report['output_span_s']:.1f} s of output)")
    unclean = {name: code for name, code in exits.items() if code != 0}
    if unclean:
        print(f"worker(s) did not stop cleanly: {unclean}")
    return 0 if report["ok"] and not unclean else 1


def _progress(report: dict, pool: list[Worker]) -> None:
    dead = [w.name for w in pool if not w.alive()]
    if dead:
        raise SystemExit(f"worker(s) {', '.join(dead)} exited: see {pool[0].log_path.parent}")
    sys.stderr.write(f"\rwaiting for outputs: {report['total_updates']:,}/{report['counted_events']:,} "
                     "total updates committed   ")
    sys.stderr.flush()


def _print_totals(report: dict) -> None:
    print(f"{'merchant':<10} {'payments':>10} {'amount':>18}")
    for merchant, total in report["final_totals"].items():
        print(f"{merchant:<10} {total['count']:>10,} {total['amount_cents'] / 100:>18,.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="events to produce (default 20000)")
    parser.add_argument("--guarantee", choices=GUARANTEES, default="exactly_once")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the outputs")
    args = parser.parse_args(argv)
    try:
        return run(args.count, args.guarantee, args.workers, args.seed, args.timeout)
    except (broker.BrokerError, config.ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
