"""A benchmark run's raw results summarised: per point and guarantee, medians with their spread.

Shared by the Markdown report (:mod:`benchmarks.report`) and its plots (:mod:`benchmarks.plots`).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple, Optional

from benchmarks import stats

#: the throughput figure: the rate a backlog drains at (:func:`benchmarks.stats.drain_rate`)
THROUGHPUT = "throughput.drain_events_per_s"
GUARANTEES = ("at_least_once", "exactly_once")
SHORT = {"at_least_once": "ALO", "exactly_once": "EOS"}
#: what the report shows of the stock Faust reference line
STOCK_METRICS = (THROUGHPUT, "latency_ms.p50", "latency_ms.p99", "cpu.worker_s_per_1k_events", "worker_peak_rss_mb")


class PointKey(NamedTuple):
    """A benchmark point, as runs are grouped by it."""

    interval_ms: int
    record_bytes: int
    partitions: int
    workers: int
    backlog: int


def point_key(point: dict) -> PointKey:
    return PointKey(point["commit_interval_ms"], point["record_bytes"], point["partitions"], point["workers"],
                    point["backlog"])


def point_label(key: PointKey) -> str:
    return (f"{interval_text(key.interval_ms)}, {key.record_bytes or '~130'} B, {key.partitions} p, "
            f"{key.workers} w, {key.backlog:,} backlog")


def interval_sweep(summary: dict) -> tuple[Optional[PointKey], list[PointKey]]:
    """The first point (the smallest of every knob but the commit interval) and the commit-interval sweep at it."""
    if not summary:
        return None, []
    base = min(summary, key=lambda k: (*k[1:], k.interval_ms))
    return base, sorted(k for k in summary if k[1:] == base[1:])


def with_backlogs(results: dict) -> dict:
    """``results`` with each run's backlog in its point (runs recorded before points had one: the workload's)."""
    backlog = results["meta"]["workload"].get("throughput_events")
    for group in ("pipeline", "stock_faust", "profiles", "failures"):
        for run in results.get(group) or []:
            if "point" in run:
                run["point"].setdefault("backlog", backlog)
    return results


def interval_text(ms: int) -> str:
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms} ms"


def get(result: dict, path: str) -> Optional[float]:
    value: Any = result
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def summarise(results: dict) -> dict:
    """Per point: each metric's spread per guarantee, and paired EOS-vs-ALO comparisons per repeat."""
    by_point: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for result in results["pipeline"]:
        by_point[point_key(result["point"])][result["guarantee"]].append(result)
    metrics = [THROUGHPUT, "latency_ms.p50", "latency_ms.p95", "latency_ms.p99",
               "latency_ms.max", "commits.p50_ms", "commits.p99_ms", "commits.rounds_per_s",
               "commits.partition_commits_per_s", "cpu.worker_s_per_1k_events", "cpu.broker_s_per_1k_events",
               "cpu.worker_cores_while_draining", "worker_peak_rss_mb", "lso_lag.max_records", "lso_lag.mean_records"]
    summary = {}
    for key, runs in sorted(by_point.items()):
        entry: dict[str, Any] = {g: {m: stats.spread([get(r, m) for r in runs.get(g, [])]) for m in metrics}
                                 for g in GUARANTEES}
        for g in GUARANTEES:  # how long each drain took: its events over its rate
            entry[g]["drain_s"] = stats.spread([_drain_seconds(r) for r in runs.get(g, [])])
            entry[g]["drained_events"] = stats.spread([get(r, "throughput.events") for r in runs.get(g, [])])
        pairs = _pairs(runs)
        entry["throughput_overhead_pct"] = stats.spread(
            [stats.overhead_pct(get(a, THROUGHPUT), get(e, THROUGHPUT)) for a, e in pairs])
        entry["throughput_ratio"] = stats.spread(
            [ratio(get(e, THROUGHPUT), get(a, THROUGHPUT)) for a, e in pairs])
        for q in ("p50", "p99"):
            entry[f"latency_{q}_added_ms"] = stats.spread(
                [_diff(get(e, f"latency_ms.{q}"), get(a, f"latency_ms.{q}")) for a, e in pairs])
            entry[f"latency_{q}_ratio"] = stats.spread(
                [ratio(get(e, f"latency_ms.{q}"), get(a, f"latency_ms.{q}")) for a, e in pairs])
        entry["cdf"] = {g: _median_run(runs.get(g, []), "latency_ms.p50")["latency_ms"]["cdf"]
                        for g in GUARANTEES if runs.get(g)}
        entry["runs"] = {g: len(runs.get(g, [])) for g in GUARANTEES}
        stock = [r for r in results.get("stock_faust", []) if point_key(r["point"]) == key]
        if stock:  # the reference line: stock Faust on the same two hops
            entry["stock_faust"] = {m: stats.spread([get(r, m) for r in stock]) for m in STOCK_METRICS}
            entry["stock_faust"]["runs"] = len(stock)
            entry["stock_faust"]["counts_match"] = all(r["counts"]["match"] for r in stock)
        summary[key] = entry
    return summary


def _drain_seconds(result: dict) -> Optional[float]:
    rate, events = get(result, THROUGHPUT), get(result, "throughput.events")
    return events / rate if rate and events else None


def _pairs(runs: dict[str, list[dict]]) -> list[tuple[dict, dict]]:
    """(at_least_once, exactly_once) results of the same repeat: measured side by side."""
    alo = {r["repeat"]: r for r in runs.get("at_least_once", [])}
    return [(alo[r["repeat"]], r) for r in runs.get("exactly_once", []) if r["repeat"] in alo]


def _diff(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else a - b


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or not b else a / b


def _median_run(runs: list[dict], metric: str) -> dict:
    ordered = sorted((r for r in runs if get(r, metric) is not None), key=lambda r: get(r, metric))
    return ordered[len(ordered) // 2] if ordered else runs[0]


#: the lines run at one point with one worker, by results section, each with the guarantee it runs under: the
#: ordinary Faust app on faust-eos (:mod:`benchmarks.ordinary_eos`) and the same two hops written with Quix
#: Streams (:mod:`benchmarks.quix_two_hops`)
ONE_WORKER_LINES = {
    "ordinary_app": {"ordinary_at_least_once": "at_least_once", "ordinary_exactly_once": "exactly_once"},
    "quix": {"quix_at_least_once": "at_least_once", "quix_exactly_once": "exactly_once"},
}


def summarise_line(results: dict, section: str) -> dict:
    """Per guarantee the line of ``results[section]`` (:data:`ONE_WORKER_LINES`) ran under: its runs' spread of
    :data:`STOCK_METRICS`, their point, and whether every run's counts matched reconcile's."""
    out: dict[str, Any] = {}
    for line, guarantee in ONE_WORKER_LINES[section].items():
        runs = [r for r in results.get(section) or [] if r["guarantee"] == line]
        if runs:
            out[guarantee] = {m: stats.spread([get(r, m) for r in runs]) for m in STOCK_METRICS}
            out[guarantee].update(runs=len(runs), point=point_key(runs[0]["point"]),
                                  counts_match=all(r["counts"]["match"] for r in runs))
    return out


def summarise_references(results: dict) -> dict:
    """Per record size: raw limits, and each transactional setting against the idempotent run of its repeat."""
    out: dict[int, dict] = {}
    for size in sorted({r["record_bytes"] for r in results["reference"]}):
        refs = [r for r in results["reference"] if r["record_bytes"] == size]
        entry: dict[str, Any] = {
            "mean_record_bytes": refs[0]["mean_record_bytes"],
            "producer": stats.spread([r["raw"]["records_per_s"] for r in refs]),
            "consumer": stats.spread([r["raw"].get("consumer_records_per_s") for r in refs]),
            "transactional": {},
        }
        settings = {(t["transaction_ms"], t["transaction_records"]) for r in refs for t in r["transactional"]}
        for setting in sorted(settings, key=lambda s: (s[0] is None, s[0] or 0, s[1] or 0)):
            runs = [(r["raw"], t) for r in refs for t in r["transactional"]
                    if (t["transaction_ms"], t["transaction_records"]) == setting]
            entry["transactional"][setting] = {
                "records_per_s": stats.spread([t["records_per_s"] for _, t in runs]),
                "records_per_transaction": stats.spread([t["records_per_transaction"] for _, t in runs]),
                "overhead_pct": stats.spread([stats.overhead_pct(raw["records_per_s"], t["records_per_s"])
                                              for raw, t in runs]),
            }
        out[size] = entry
    return out
