"""One benchmark point: the pipeline under one guarantee and one set of knobs, measured from outside.

A run has three phases on fresh topics: a warm-up (not measured) that also
proves the workers are up, a latency phase (a steady load well below
capacity, for end-to-end latency) and a throughput phase (a backlog produced
as fast as possible, for the rate the pipeline drains it at). Afterwards the workers stop
cleanly and ``reconcile`` checks the run; its counts must equal the benchmark's.
"""
from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

from app import loadgen
from app.kafka import admin
from app.reconcile import read_committed
from benchmarks import profile, stats
from benchmarks.measure import LsoSampler, OutputWatcher, commit_rounds, cpu_seconds, peak_rss_mb
from config import REPO_ROOT
from tools import broker
from tools.run import PipelineRun
from tools.workers import wait_for

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Point:
    """The knobs of one benchmark point (run under each guarantee)."""

    commit_interval_ms: int
    record_bytes: int
    partitions: int
    workers: int
    backlog: int  # input records of the throughput phase

    @property
    def label(self) -> str:
        return (f"{self.commit_interval_ms} ms, {self.record_bytes or 'plain'} B, {self.partitions} partitions, "
                f"{self.workers} workers, {self.backlog:,}-record backlog")


@dataclass(frozen=True)
class Workload:
    """How much load each phase gets."""

    warmup_events: int = 500
    latency_rate: float = 2000.0
    latency_seconds: float = 15.0
    seed: int = 1
    drain_timeout_s: float = 300.0

    def seeds(self) -> tuple[int, int, int]:
        """Load seeds of the warm-up, latency and throughput phases (distinct event ids)."""
        base = self.seed * 10
        return base + 1, base + 2, base + 3


#: the reference line's "guarantee": stock Faust on the same two hops (:mod:`benchmarks.stock_faust`)
STOCK_FAUST = "stock_faust"
#: the reference lines of an ordinary Faust app on faust-eos (:mod:`benchmarks.ordinary_eos`), per guarantee
ORDINARY_EXACTLY_ONCE = "ordinary_exactly_once"
ORDINARY_AT_LEAST_ONCE = "ordinary_at_least_once"
#: the reference lines of the same two hops written with Quix Streams (:mod:`benchmarks.quix_two_hops`), per guarantee
QUIX_EXACTLY_ONCE = "quix_exactly_once"
QUIX_AT_LEAST_ONCE = "quix_at_least_once"
#: each reference line: the two-hop app it runs (:mod:`benchmarks.two_hops`, or its Quix Streams version), and
#: under which guarantee
REFERENCE_APPS = {
    STOCK_FAUST: ("benchmarks.stock_faust", "at_least_once"),
    ORDINARY_EXACTLY_ONCE: ("benchmarks.ordinary_eos", "exactly_once"),
    ORDINARY_AT_LEAST_ONCE: ("benchmarks.ordinary_eos", "at_least_once"),
    QUIX_EXACTLY_ONCE: ("benchmarks.quix_two_hops", "exactly_once"),
    QUIX_AT_LEAST_ONCE: ("benchmarks.quix_two_hops", "at_least_once"),
}
#: the interpreter of the Quix Streams lines, in a virtualenv of their own
QUIX_PYTHON = REPO_ROOT / ".venv-quix" / "bin" / "python"
QUIX_MISSING = ".venv-quix, the Quix Streams lines' virtualenv, is missing: run scripts/setup-quix"


def quix_version() -> Optional[str]:
    """The Quix Streams release installed in ``.venv-quix``; None without one."""
    found = sorted(QUIX_PYTHON.parent.parent.glob("lib/python*/site-packages/quixstreams-*.dist-info"))
    return found[-1].name.removeprefix("quixstreams-").removesuffix(".dist-info") if found else None


def quix_command(app_module: str) -> tuple[str, ...]:
    """The command line of a Quix Streams worker running ``app_module``; RuntimeError if its virtualenv is missing."""
    if not QUIX_PYTHON.exists():
        raise RuntimeError(QUIX_MISSING)
    return str(QUIX_PYTHON), "-m", app_module


def run_point(point: Point, guarantee: str, workload: Workload, work_dir: Path, progress: Progress,
              profile_to: Optional[Path] = None) -> dict:
    """Run and measure ``point`` under ``guarantee``; return the raw result.

    With ``profile_to``, the first worker is sampled with py-spy through the
    throughput phase into that file, and the result has its summary (``profile``).
    ``guarantee`` naming a reference line (:data:`REFERENCE_APPS`) runs its two-hop
    app instead (a Quix Streams line's in ``.venv-quix``): it times no commit rounds, and
    as it has no windows and no dead letters, only reconcile's counts of events and
    updates apply to it.
    """
    app_module, run_guarantee = REFERENCE_APPS.get(guarantee, ("app", guarantee))
    reference = guarantee in REFERENCE_APPS
    command = quix_command(app_module) if guarantee in (QUIX_EXACTLY_ONCE, QUIX_AT_LEAST_ONCE) else None
    name = f"bench-{guarantee[:3]}-{uuid.uuid4().hex[:6]}"
    run_dir = work_dir / name
    run = PipelineRun(name, run_dir, guarantee=run_guarantee, COMMIT_INTERVAL_MS=str(point.commit_interval_ms),
                      PARTITIONS=str(point.partitions))
    settings = run.settings
    watcher = OutputWatcher(settings, settings.totals_topic)
    sampler = LsoSampler(settings, settings.totals_topic, point.partitions)
    watcher.start()
    sampler.start()
    warm_seed, latency_seed, throughput_seed = workload.seeds()
    result: dict = {"guarantee": guarantee, "point": asdict(point), "run": name}
    profiler: Optional[profile.Sampler] = None
    try:
        for _ in range(point.workers):
            run.add_worker(app_module, command=command)
        result["restarted_workers"] = warm_up(run, watcher, warm_seed, workload.warmup_events, point.record_bytes,
                                              workload.drain_timeout_s, progress, until_ready=not reference)

        pids = [w.pid for w in run.workers]
        broker_pid = broker.pid(settings)
        cpu_before = {pid: cpu_seconds(pid) for pid in pids}
        broker_before = cpu_seconds(broker_pid) if broker_pid else None
        measured_from = time.time()

        latency_spec = loadgen.LoadSpec(count=int(workload.latency_rate * workload.latency_seconds),
                                        rate=workload.latency_rate, seed=latency_seed, record_bytes=point.record_bytes)
        progress(f"latency phase: {latency_spec.count:,} events at {workload.latency_rate:,.0f}/s")
        latency_load = run.produce(latency_spec)
        watcher.wait_for_seed(latency_seed, latency_load.by_kind["valid"], workload.drain_timeout_s,
                              lambda done, total: progress(f"latency phase: {done:,}/{total:,} visible"))

        throughput_spec = loadgen.LoadSpec(count=point.backlog, seed=throughput_seed,
                                           record_bytes=point.record_bytes)
        progress(f"throughput phase: producing {throughput_spec.count:,} events")
        profiler = profile.Sampler(pids[0], profile_to) if profile_to is not None else None
        throughput_started = time.time()
        cpu_at_backlog = {pid: cpu_seconds(pid) for pid in pids}
        throughput_load = run.produce(throughput_spec)
        watcher.wait_for_seed(throughput_seed, throughput_load.by_kind["valid"], workload.drain_timeout_s,
                              lambda done, total: progress(f"throughput phase: {done:,}/{total:,} visible"))
        drained_in = time.time() - throughput_started
        drain_cores = [(cpu_seconds(pid) - cpu_at_backlog[pid]) / drained_in for pid in pids]
        if profiler is not None:
            try:
                result["profile"] = profiler.stop()
            except RuntimeError as exc:  # the run itself is sound: its measurements stand
                result["profile_error"] = str(exc)
        measured_until = time.time()
        _check_workers(run)

        inputs = latency_load.produced + throughput_load.produced
        worker_cpu = sum(cpu_seconds(pid) - cpu_before[pid] for pid in pids)
        broker_cpu = cpu_seconds(broker_pid) - broker_before if broker_pid else None
        rounds = [] if reference else [r for w in run.workers
                                   for r in commit_rounds(int(w.env["WEB_PORT"]), measured_from, measured_until)]
        peak_rss = max(peak_rss_mb(pid) for pid in pids)
    except BaseException:
        watcher.stop()
        raise
    finally:
        if profiler is not None:
            profiler.close()
        progress("stopping workers")
        exit_codes = run.stop_all()
        sampler.stop()

    progress("reconciling")
    reconciled = run.reconcile(wait_s=0 if reference else 60)  # the two-hop apps never pass it whole (no windows)
    watcher.stop()
    created = _creation_times(run)
    latencies_ms = [(watcher.visible_at[e] - created[e]) * 1000 for e in watcher.visible_at
                    if e.startswith(f"{latency_seed}-") and e in created]
    throughput_times = [t for e, t in watcher.visible_at.items() if e.startswith(f"{throughput_seed}-")]
    span = measured_until - measured_from
    lso = [s for s in sampler.samples if measured_from <= s["t"] <= measured_until]
    commit_ms = [r[1] for r in rounds]
    result.update({
        "exit_codes": exit_codes,
        "throughput": {
            "drain_events_per_s": stats.drain_rate(throughput_times, throughput_started),
            "events": throughput_load.by_kind["valid"],
            "input_records": throughput_load.produced,
            "producer_records_per_s": throughput_load.rate,
        },
        "latency_ms": {**stats.summary(latencies_ms), "events": len(latencies_ms),
                       "cdf": stats.cdf_points(latencies_ms)},
        "commits": {
            "rounds": len(rounds),
            "rounds_per_s": len(rounds) / span,
            "partition_commits_per_s": sum(r[2] for r in rounds) / span,
            "p50_ms": stats.percentile(commit_ms, 50),
            "p99_ms": stats.percentile(commit_ms, 99),
            "max_ms": max(commit_ms) if commit_ms else None,
        },
        "cpu": {
            "worker_s_per_1k_events": worker_cpu / inputs * 1000,
            # cores a worker kept busy (all its threads) from the backlog's first event to its last
            # update: near 1.0 it is bound by one core, as Python runs one thread at a time
            "worker_cores_while_draining": max(drain_cores),
            "broker_s_per_1k_events": broker_cpu / inputs * 1000 if broker_cpu is not None else None,
            "input_records": inputs,
            "seconds": span,
        },
        "worker_peak_rss_mb": peak_rss,
        "lso_lag": {
            "max_records": max((s["lag"] for s in lso), default=0),
            "mean_records": sum(s["lag"] for s in lso) / len(lso) if lso else 0,
            "p99_ms": stats.percentile([s["lag_ms"] for s in lso], 99),
            "max_ms": max((s["lag_ms"] for s in lso), default=0),
            "samples": len(lso),
        },
        "counts": {
            "visible_events": len(watcher.visible_at),
            "visible_updates": watcher.records,
            "reconcile_counted_events": reconciled["counted_events"],
            "reconcile_total_updates": reconciled["total_updates"],
            "match": len(watcher.visible_at) == reconciled["counted_events"]
            and watcher.records == reconciled["total_updates"],
        },
        "reconcile_ok": reconciled["ok"],
        "reconcile_problems": {k: v["count"] for k, v in reconciled["problems"].items()},
    })
    clean_up(run)
    return result


#: a worker that started before its new changelog topics showed in the broker's metadata:
#: Faust's agent then crash-loops on every event; a restart finds the topics
STARTUP_RACE = "PartitionsMismatch"


def warm_up(run: PipelineRun, watcher: OutputWatcher, seed: int, count: int, record_bytes: int, timeout_s: float,
            progress: Progress, *, until_ready: bool = True) -> int:
    """Unmeasured load (no duplicates or bad records) until all of it is visible: the workers are up and warm.

    With ``until_ready`` (workers of the pipeline's app, which serves ``/ready``), then until every worker is
    ready: workers that start together join the group one after the other, and the first can make the
    warm-up visible alone, before the others' joining rebalances the group; measured load must not meet
    that rebalance. Returns how many workers had to be restarted after the start-up race above.
    """
    progress("warm-up: starting workers")
    spec = loadgen.LoadSpec(count=count, seed=seed, duplicate_rate=0, bad_rate=0, record_bytes=record_bytes)
    run.produce(spec)
    deadline = time.monotonic() + timeout_s
    restarted: set[str] = set()
    while watcher.by_seed[str(seed)] < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"warm-up: only {watcher.by_seed[str(seed)]} of {count} events visible "
                               f"after {timeout_s:.0f} s; see the worker logs in {run.run_dir}")
        for worker in run.workers:
            if worker.name not in restarted and STARTUP_RACE in worker.log_text():
                progress(f"warm-up: {worker.name} hit the changelog start-up race, restarting it")
                worker.stop()
                worker.start()
                restarted.add(worker.name)
        progress(f"warm-up: {watcher.by_seed[str(seed)]:,}/{count:,} visible")
        time.sleep(0.5)
    if until_ready:
        progress("warm-up: waiting for every worker to be ready")
        wait_for(lambda: all(worker.ready() for worker in run.workers), max(0.0, deadline - time.monotonic()),
                 interval=0.2, what=f"every worker's /ready (worker logs in {run.run_dir})")
    _check_workers(run)
    return len(restarted)


def _check_workers(run: PipelineRun) -> None:
    dead = [w.name for w in run.workers if not w.alive()]
    if dead:
        raise RuntimeError(f"worker(s) {', '.join(dead)} died; see their logs in {run.run_dir}")


def _creation_times(run: PipelineRun) -> dict[str, float]:
    """event_id -> creation time (the event's ``ts``), from the committed input."""
    created: dict[str, float] = {}
    for rec in read_committed(run.settings, run.settings.input_topic):
        try:
            event = json.loads(rec.value)
            created.setdefault(event["event_id"], float(event["ts"]))
        except (ValueError, KeyError, TypeError):
            continue  # a bad record the load generator made on purpose
    return created


def clean_up(run: PipelineRun) -> None:
    """Delete the run's topics and worker state: a full sweep would otherwise fill the broker."""
    client = admin(run.settings)
    # the run's app id is in the name of every topic its apps made: Faust's start with it, Quix Streams'
    # with "changelog__" or "repartition__" before it
    topics = [t for t in client.list_topics(timeout=30).topics
              if t.startswith(run.settings.topic_prefix) or run.settings.app_id in t]
    if topics:
        for future in client.delete_topics(topics, operation_timeout=60).values():
            try:
                future.result()
            except Exception:
                pass  # already gone
    shutil.rmtree(run.run_dir, ignore_errors=True)
