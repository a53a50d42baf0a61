"""``python -m benchmarks``: the exactly-once cost benchmarks, from the sweep to the report.

Runs every point under at_least_once and exactly_once, interleaved (the order
alternates between repeats), with the reference lines, then one profiled run
per guarantee (:mod:`benchmarks.profile`) and the long-transaction scenario,
writing the raw results as JSON after every run and, at the end, a Markdown
report with PNG plots.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Optional

import config
from benchmarks import longtx, profile, reference, report
from benchmarks.measure import machine
from benchmarks.pipeline import QUIX_MISSING, QUIX_PYTHON, STOCK_FAUST, Point, Workload, quix_version, run_point
from benchmarks.summary import ONE_WORKER_LINES
from config import REPO_ROOT, settings
from tools import broker

GUARANTEES = ("at_least_once", "exactly_once")
#: the backlog the ordinary Faust app and the Quix Streams line drain by default
ORDINARY_APP_BACKLOG = 100_000
#: what the progress calls the lines of :data:`benchmarks.summary.ONE_WORKER_LINES`, by results section
LINE_TITLES = {"ordinary_app": "ordinary Faust app", "quix": "Quix Streams"}


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one number, none negative")
    return values


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a one-minute check of the tooling: one point, one repeat, small loads")
    parser.add_argument("--commit-intervals", type=_ints, default=[1000, 100], metavar="MS,...",
                        help="commit intervals to sweep, ms; the other knobs are swept at the first "
                             "(default 1000,100; 50 and 10000 work too)")
    parser.add_argument("--record-sizes", type=_ints, default=[0, 1024], metavar="BYTES,...",
                        help="input record sizes; 0 = the plain ~130 B events (default 0,1024)")
    parser.add_argument("--partitions", type=_ints, default=[6], metavar="N,...", help="partition counts (default 6)")
    parser.add_argument("--workers", type=_ints, default=[1, 2], metavar="N,...", help="worker counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each point and guarantee (default 2)")
    parser.add_argument("--latency-rate", type=float, default=2000.0,
                        help="latency phase load, events/s (default 2000, about half of what one worker drains)")
    parser.add_argument("--latency-seconds", type=float, default=15.0, help="latency phase length (default 15)")
    parser.add_argument("--throughput-events", type=_ints, default=[50_000, 200_000], metavar="N,...",
                        help="throughput phase backlogs, input records; the first at every point, each other "
                             "at the first point alone, to show memory as the backlog grows (default "
                             "50000,200000: the last commit's tail a small part of the drain)")
    parser.add_argument("--warmup-events", type=int, default=500, help="unmeasured warm-up events (default 500)")
    parser.add_argument("--reference-seconds", type=float, default=3.0,
                        help="length of each reference producer measurement (default 3)")
    parser.add_argument("--tx-records", type=_ints, default=[10, 100, 1000], metavar="N,...",
                        help="transactional producer reference: records per transaction (default 10,100,1000)")
    parser.add_argument("--no-long-transaction", dest="long_transaction", action="store_false",
                        help="skip the long-transaction scenario")
    parser.add_argument("--no-stock-faust", dest="stock_faust", action="store_false",
                        help="skip the stock Faust reference line (benchmarks/stock_faust.py), run at each "
                             "commit interval")
    parser.add_argument("--no-ordinary-app", dest="ordinary_app", action="store_false",
                        help="skip the ordinary Faust app on faust-eos (benchmarks/ordinary_eos.py), run under both "
                             "guarantees at the first point with one worker")
    parser.add_argument("--no-quix", dest="quix", action="store_false",
                        help="skip the same two hops written with Quix Streams (benchmarks/quix_two_hops.py, in "
                             ".venv-quix: scripts/setup-quix), run under both guarantees beside the ordinary app")
    parser.add_argument("--ordinary-app-backlog", type=int, default=ORDINARY_APP_BACKLOG, metavar="N",
                        help=f"the backlog the ordinary Faust app and the Quix Streams line drain (default "
                             f"{ORDINARY_APP_BACKLOG:,}: large enough that a worker stalling under load shows)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the profiled runs (one per guarantee at the first point, with py-spy)")
    parser.add_argument("--stall-timeout-ms", type=int, default=20_000,
                        help="transaction.timeout.ms of the stalling producer (default 20000)")
    parser.add_argument("--seed", type=int, default=1, help="load seed (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="report directory: JSON and plots (default docs/benchmarks, or reports/bench-quick)")
    parser.add_argument("--report", type=Path, default=None,
                        help="Markdown report (default docs/benchmarks.md, or <out>/report.md with --quick)")
    parser.add_argument("--report-from", type=Path, default=None, metavar="RESULTS_JSON",
                        help="run nothing: rewrite the report and plots from the raw results of an earlier run")
    args = parser.parse_args(argv)
    if args.quick:
        args.commit_intervals, args.record_sizes, args.partitions, args.workers = [100], [0], [6], [1]
        args.repeats, args.latency_rate, args.latency_seconds = 1, 200.0, 5.0
        args.throughput_events, args.warmup_events, args.reference_seconds, args.tx_records = [3_000], 200, 1.0, [10]
        args.ordinary_app_backlog = 3_000
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.profile and args.report_from is None and profile.py_spy() is None:
        parser.error("py-spy is not installed (scripts/setup installs it): install it, or pass --no-profile")
    if args.quix and args.report_from is None and not QUIX_PYTHON.exists():
        parser.error(f"{QUIX_MISSING}, or pass --no-quix")
    if any(n < 1 for n in args.throughput_events):
        parser.error("--throughput-events must all be at least 1")
    if args.ordinary_app_backlog < 1:
        parser.error("--ordinary-app-backlog must be at least 1")
    if any(ms < 1 or ms * 3 > 900_000 for ms in args.commit_intervals):
        parser.error("--commit-intervals must be between 1 and 300000 ms")
    if any(size > settings.max_event_bytes for size in args.record_sizes):
        parser.error(f"--record-sizes above MAX_EVENT_BYTES={settings.max_event_bytes} would all be dead-lettered")
    if args.out is None:
        args.out = REPO_ROOT / ("reports/bench-quick" if args.quick else "docs/benchmarks")
    if args.report is None:
        args.report = args.out / "report.md" if args.quick else REPO_ROOT / "docs/benchmarks.md"
    return args


def points(args: argparse.Namespace) -> list[Point]:
    """The commit-interval sweep at the first size/partitions/workers/backlog, then each other knob alone."""
    size, parts, workers, backlog = args.record_sizes[0], args.partitions[0], args.workers[0], args.throughput_events[0]
    interval = args.commit_intervals[0]
    result = [Point(ci, size, parts, workers, backlog) for ci in args.commit_intervals]
    result += [Point(interval, s, parts, workers, backlog) for s in args.record_sizes[1:]]
    result += [Point(interval, size, p, workers, backlog) for p in args.partitions[1:]]
    result += [Point(interval, size, parts, w, backlog) for w in args.workers[1:]]
    result += [Point(interval, size, parts, workers, b) for b in args.throughput_events[1:]]
    return list(dict.fromkeys(result))


class Progress:
    """One status line per step on stderr: where the run is, how long it took so far."""

    def __init__(self, total_steps: int) -> None:
        self.total = total_steps
        self.step = 0
        self.title = ""
        self.started = time.monotonic()
        self._last = ""
        self._last_message = ""
        self._last_at = 0.0
        self._tty = sys.stderr.isatty()

    def begin(self, title: str) -> None:
        self.step += 1
        self.title = title
        self("starting")

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        line = f"[{self.step}/{self.total} {(now - self.started) / 60:5.1f} min] {self.title}: {message}"
        if self._tty:
            sys.stderr.write("\r" + line[:150].ljust(150))
        elif line != self._last and (now - self._last_at > 5 or _shape(message) != _shape(self._last_message)):
            sys.stderr.write(line + "\n")
            self._last_at = now
            self._last_message = message
        self._last = line
        sys.stderr.flush()

    def done(self, message: str) -> None:
        self(message)
        if self._tty:
            sys.stderr.write("\n")


class Steps:
    """Runs the benchmark's steps one at a time, each under its own progress line.

    A step that raises is recorded under ``results["failures"]`` (with what names it) and
    shown as FAILED, and the run goes on: one failed run must not cost the whole sweep.
    The results are saved after every step, whatever its outcome.
    """

    def __init__(self, progress: Progress, results: dict[str, Any], save: Callable[[], None]) -> None:
        self.progress = progress
        self.results = results
        self.save = save

    def __call__(self, title: str, section: str, names: dict[str, Any], run: Callable[[], dict],
                 summary: Callable[[dict], str]) -> Optional[dict]:
        """Run one step, its result kept under ``results[section]``; None if it failed."""
        self.progress.begin(title)
        try:
            result = run()
        except Exception as exc:
            self.results["failures"].append({**names, "error": f"{type(exc).__name__}: {exc}"})
            self.save()
            self.progress.done(f"FAILED: {exc}")
            return None
        self.results[section].append(result)
        self.save()
        self.progress.done(summary(result))
        return result


def _drain(result: dict) -> str:
    return f"{result['throughput']['drain_events_per_s'] or 0:,.0f} events/s"


def _shape(message: str) -> str:
    """A message without its numbers: a new shape means a new step worth a line of its own."""
    return re.sub(r"[\d,.]+", "", message)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    if args.report_from is not None:
        results = json.loads(args.report_from.read_text())
        report.write(results, args.report, args.out)
        print(f"report: {args.report}\nplots: {args.out}")
        return 0
    broker.ensure_running(settings)
    plan = points(args)
    work_dir = REPO_ROOT / ".data" / "bench"
    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / "results.json"
    workload = Workload(warmup_events=args.warmup_events, latency_rate=args.latency_rate,
                        latency_seconds=args.latency_seconds, seed=args.seed)
    modes = ["manual"] if args.quick else ["timeout", "manual"]
    first = plan[0]
    stock_points = [p for p in plan  # the commit-interval sweep: the first point but for its interval
                    if replace(p, commit_interval_ms=first.commit_interval_ms) == first] if args.stock_faust else []
    wanted = {"ordinary_app": args.ordinary_app, "quix": args.quix}
    one_worker_lines = [(line, section) for section, lines in ONE_WORKER_LINES.items() if wanted[section]
                        for line in lines]  # at the ordinary app's point: one worker, its backlog
    ordinary_point = replace(first, workers=1, backlog=args.ordinary_app_backlog)
    steps = (len(GUARANTEES) + args.repeats * (len(plan) * len(GUARANTEES) + len(args.record_sizes) + len(stock_points)
                                               + len(one_worker_lines))
             + len(modes) * args.long_transaction + len(GUARANTEES) * args.profile)
    progress = Progress(steps)
    results: dict[str, Any] = {
        "meta": {
            "command": " ".join(["python -m benchmarks", *(sys.argv[1:] if argv is None else argv)]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "kafka_version": settings.kafka_version,
            "bootstrap_servers": settings.bootstrap_servers,
            "local_broker": settings.use_local_broker,
            "machine": machine(),
            "python": platform.python_version(),
            "python_executable": os.path.realpath(sys.executable),  # its build matters (scripts/setup)
            "quix_version": quix_version() if args.quix else None,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "workload": asdict(workload),
            "pipeline_settings": {"transaction_timeout_ms": "the default (10 s, or 3 x the commit interval if longer)",
                                  "dedup_retention_days": settings.dedup_retention_days,
                                  "window_seconds": settings.window_seconds,
                                  "session_timeout_s": settings.session_timeout_s},
        },
        "pipeline": [], "reference": [], "stock_faust": [], "ordinary_app": [], "quix": [], "long_transaction": [],
        "profiles": [], "failures": [],
        "warm_up": [],
    }

    def save() -> None:
        results_path.write_text(json.dumps(results, indent=1))

    step = Steps(progress, results, save)
    # A broker's first pipeline runs cost it more CPU per event than later ones (its JVM warming up): one run
    # of each guarantee is not measured, so that no measured run pays for that.
    for guarantee in GUARANTEES:
        step(f"warm-up run (not measured), {guarantee}, {first.label}", "warm_up", {"warm_up": guarantee},
             lambda: run_point(first, guarantee, workload, work_dir, progress), lambda result: "done")

    for repeat in range(args.repeats):
        for size in args.record_sizes:
            step(f"repeat {repeat + 1}, reference producers, {size or 'plain'} B records", "reference",
                 {"repeat": repeat, "reference": size},
                 lambda: {"repeat": repeat, **run_references(args, size, args.partitions[0], progress)},
                 lambda result: "done")
        order = GUARANTEES if repeat % 2 == 0 else GUARANTEES[::-1]  # cancels slow drift of the machine
        for point in plan:
            for guarantee in order:
                step(f"repeat {repeat + 1}, {guarantee}, {point.label}", "pipeline",
                     {"repeat": repeat, "guarantee": guarantee, "point": asdict(point)},
                     lambda: {**run_point(point, guarantee, workload, work_dir, progress), "repeat": repeat},
                     lambda result: f"{_drain(result)}, p50 {result['latency_ms']['p50'] or 0:,.0f} ms, "
                                    f"counts match reconcile: {result['counts']['match']}")
        for point in stock_points:
            step(f"repeat {repeat + 1}, stock Faust reference, {point.label}", "stock_faust",
                 {"repeat": repeat, "guarantee": STOCK_FAUST, "point": asdict(point)},
                 lambda: {**run_point(point, STOCK_FAUST, workload, work_dir, progress), "repeat": repeat},
                 lambda result: f"{_drain(result)}, counts match reconcile: {result['counts']['match']}")
        for line, section in one_worker_lines if repeat % 2 == 0 else one_worker_lines[::-1]:
            step(f"repeat {repeat + 1}, {LINE_TITLES[section]}, {line}, {ordinary_point.label}", section,
                 {"repeat": repeat, "guarantee": line, "point": asdict(ordinary_point)},
                 lambda: {**run_point(ordinary_point, line, workload, work_dir, progress), "repeat": repeat},
                 lambda result: f"{_drain(result)}, counts match reconcile: {result['counts']['match']}")
    if args.profile:
        for guarantee in GUARANTEES:
            step(f"profiled run, {guarantee}, {plan[0].label}", "profiles", {"profile": guarantee},
                 lambda: run_point(plan[0], guarantee, workload, work_dir, progress,
                                   profile_to=args.out / f"profile-{guarantee}.raw"),
                 lambda result: f"profile not taken: {result['profile_error']}" if "profile_error" in result
                 else f"{_drain(result)} while profiled")
    if args.long_transaction:
        for mode in modes:
            scenario = longtx.Scenario(mode=mode, partitions=args.partitions[0], stall_timeout_ms=args.stall_timeout_ms)
            step(f"long transaction, {mode}", "long_transaction", {"long_transaction": mode},
                 lambda: longtx.run_scenario(scenario, work_dir, progress, seed=args.seed), lambda result: "done")
    results["meta"]["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    results["meta"]["minutes"] = round((time.monotonic() - progress.started) / 60, 1)
    save()
    report.write(results, args.report, args.out)
    print(f"raw results: {results_path}\nreport: {args.report}\nplots: {args.out}")
    return 1 if results["failures"] else 0


def run_references(args: argparse.Namespace, size: int, partitions: int, progress: Progress) -> dict:
    """Raw limit, idempotent and transactional producer on the same records, one after the other."""
    records = reference.sample_records(size, 20_000, args.seed)
    seconds = args.reference_seconds
    progress("raw producer + consumer")
    raw = reference.producer_rate(settings, records, partitions, seconds, read_back=True)
    transactional = []
    for ms in args.commit_intervals:
        progress(f"transactional producer, a transaction every {ms} ms")
        transactional.append(reference.producer_rate(settings, records, partitions, seconds, transaction_ms=ms))
    for n in args.tx_records:
        progress(f"transactional producer, a transaction every {n} records")
        transactional.append(reference.producer_rate(settings, records, partitions, seconds, transaction_records=n))
    return {"record_bytes": size, "mean_record_bytes": sum(len(r.value) for r in records) / len(records),
            "raw": raw, "transactional": transactional}


def cli() -> None:
    """Entry point: exit code 0 if every run succeeded, one line on stderr for a setup error."""
    try:
        sys.exit(main())
    except (config.ConfigError, broker.BrokerError) as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    cli()
