"""The Markdown report of a benchmark run, from its raw results (plots: :mod:`benchmarks.plots`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from benchmarks import stats
from benchmarks.plots import write_plots
from benchmarks.sections import figure, long_transaction_section, profile_section, sanity_section, spread_text
from benchmarks.summary import (
    GUARANTEES,
    SHORT,
    THROUGHPUT,
    PointKey,
    interval_sweep,
    interval_text,
    point_key,
    point_label,
    ratio,
    summarise,
    summarise_line,
    summarise_references,
    with_backlogs,
)
from benchmarks.two_hop_findings import ordinary_app_findings, quix_findings

# --- formatting ----------------------------------------------------------------


def _pct(spread: dict) -> str:
    if spread["median"] is None:
        return "n/a"
    text = f"{spread['median']:+.1f} %"
    return text if spread["n"] == 1 else f"{text} [{spread['min']:+.1f}–{spread['max']:+.1f}]"


def _tx_label(setting: tuple) -> str:
    ms, records = setting
    return f"every {interval_text(ms)}" if ms is not None else f"every {records:,} records"


def write(results: dict, report_path: Path, plot_dir: Path) -> None:
    """Write the Markdown report to ``report_path`` and its plots into ``plot_dir``."""
    summary = summarise(with_backlogs(results))
    references = summarise_references(results)
    plot_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(results, summary, references, plot_dir)
    rel = os.path.relpath(plot_dir, report_path.parent)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text("\n".join(_markdown(results, summary, references,
                                               {k: f"{rel}/{v}"
                                                for k, v in {**plots, "results": "results.json"}.items()})) + "\n")


def headline(summary: dict, references: dict, latency_rate: Optional[float] = None) -> list[str]:
    """The findings in a few lines: overhead per commit interval, latency cost, distance to the limits."""
    lines = []
    base, sweep = interval_sweep(summary)
    for key in sorted(sweep):
        entry = summary[key]
        lines.append(
            f"* **{interval_text(key.interval_ms)} commit interval**: exactly_once throughput "
            f"{spread_text(entry['exactly_once'][THROUGHPUT])} events/s vs at_least_once "
            f"{spread_text(entry['at_least_once'][THROUGHPUT])}: ratio "
            f"{figure(entry['throughput_ratio']['median'], 2)}, overhead {_pct(entry['throughput_overhead_pct'])} "
            f"(paired per repeat); p50 latency "
            f"{figure(entry['exactly_once']['latency_ms.p50']['median'])} ms vs "
            f"{figure(entry['at_least_once']['latency_ms.p50']['median'])} ms "
            f"({_signed(entry['latency_p50_added_ms']['median'])} ms), p99 "
            f"{figure(entry['exactly_once']['latency_ms.p99']['median'])} ms vs "
            f"{figure(entry['at_least_once']['latency_ms.p99']['median'])} ms."
        )
    for key in _larger_backlogs(summary, base):
        entry = summary[key]
        if "exactly_once" in entry and "at_least_once" in entry:
            lines.append(
                f"* **{point_label(key)}** (a longer drain, less moved by where its last commits fall): "
                f"exactly_once throughput {spread_text(entry['exactly_once'][THROUGHPUT])} events/s vs at_least_once "
                f"{spread_text(entry['at_least_once'][THROUGHPUT])}: ratio "
                f"{figure(entry['throughput_ratio']['median'], 2)}.")
    for key in sorted(k for k in sweep if "stock_faust" in summary[k]):
        stock, eos = summary[key]["stock_faust"], summary[key]["exactly_once"][THROUGHPUT]["median"]
        lines.append(
            f"* **Stock Faust, {interval_text(key.interval_ms)} commit interval** (`kafka://`, at_least_once, "
            "the same two hops without windows or dead letters: `benchmarks/stock_faust.py`): "
            f"{spread_text(stock[THROUGHPUT])} events/s, "
            f"p50 / p99 latency {figure(stock['latency_ms.p50']['median'])} / "
            f"{figure(stock['latency_ms.p99']['median'])} ms, "
            f"{figure(stock['cpu.worker_s_per_1k_events']['median'], 2)} worker CPU s per 1,000 events; faust-eos "
            f"exactly_once drains {figure(ratio(eos, stock[THROUGHPUT]['median']), 2)}× its rate"
            + ("" if stock["counts_match"] else " (its counts did not all match reconcile's)")
            + (f"; the latency phase's {latency_rate:,.0f} events/s are more than it drains, so its latency is "
               f"the wait in a growing queue." if latency_rate and (stock[THROUGHPUT]["median"] or 0) < latency_rate
               else "."))
    for key in sorted(k for k in summary if k not in sweep and k.backlog == base.backlog):
        entry = summary[key]
        lines.append(f"* **{point_label(key)}**: overhead {_pct(entry['throughput_overhead_pct'])}, p50 latency "
                     f"{_signed(entry['latency_p50_added_ms']['median'])} ms.")
    lines.extend(_scaling(summary))
    lines.extend(_marginal_drain(summary, base))
    lines.extend(_memory(summary, base))
    if base and base.record_bytes in references:
        ref = references[base.record_bytes]
        best = max(summary[k]["at_least_once"][THROUGHPUT]["median"] or 0 for k in sweep)
        best_eos = max(summary[k]["exactly_once"][THROUGHPUT]["median"] or 0 for k in sweep)
        limit = min(ref["producer"]["median"] or 0, ref["consumer"]["median"] or 0)
        if limit and best:
            lines.append(
                "* **Distance to the raw broker limit**: one producer alone writes "
                f"{figure(ref['producer']['median'])} "
                f"records/s and one consumer alone reads {figure(ref['consumer']['median'])}/s; the pipeline's best "
                f"median is {figure(best)} events/s at_least_once ({best / limit * 100:.2f} % of the lower raw rate, "
                f"{limit / best:,.0f}× below it) and {figure(best_eos)} events/s exactly_once "
                f"({best_eos / limit * 100:.2f} %).")
    for ref in references.values():
        parts = [f"{_tx_label(s)} ({figure(t['records_per_transaction']['median'])} records/transaction): "
                 f"{_pct(t['overhead_pct'])}" for s, t in ref["transactional"].items()]
        lines.append(f"* **Transactional vs idempotent producer, {ref['mean_record_bytes']:,.0f} B records**: "
                     + "; ".join(parts) + ".")
    return lines


def _scaling(summary: dict) -> list[str]:
    """Per point run with more than one worker: its throughput against the same point with one worker."""
    lines = []
    for key in sorted(k for k in summary if k.workers > 1):
        single = summary.get(key._replace(workers=1))
        if single is None:
            continue
        parts = []
        for g in GUARANTEES:
            many, one = summary[key][g][THROUGHPUT]["median"], single[g][THROUGHPUT]["median"]
            parts.append(f"{g} {figure(many)} vs {figure(one)} events/s ({figure(ratio(many, one), 2)}×)")
        lines.append(f"* **{key.workers} workers vs 1** ({point_label(key)}): " + "; ".join(parts) + ".")
    return lines


def _larger_backlogs(summary: dict, base: Optional[PointKey]) -> list[PointKey]:
    """The points that differ from the first only in a larger backlog (and maybe the commit interval)."""
    return sorted(k for k in summary if base and k[1:4] == base[1:4] and k.backlog > base.backlog)


def _marginal_drain(summary: dict, base: Optional[PointKey]) -> list[str]:
    """The rate each further event of backlog drains at, and the time every drain takes, from the first
    point's smallest backlog and the largest run beside it (:func:`benchmarks.stats.marginal_drain_rate`)."""
    larger = _larger_backlogs(summary, base)
    if not larger:
        return []
    large = max(larger, key=lambda k: k.backlog)
    small = large._replace(backlog=base.backlog)
    if small not in summary:
        return []
    parts = []
    for g in GUARANTEES:
        measured = [summary[k][g][m]["median"] for k in (small, large) for m in ("drained_events", "drain_s")]
        if None in measured:  # a guarantee not run (or not drained) at one of the backlogs
            continue
        found = stats.marginal_drain_rate((measured[0], measured[1]), (measured[2], measured[3]))
        if found is not None:
            rate, fixed = found
            parts.append(f"{g} {figure(rate)} events/s plus {figure(fixed, 1)} s" + (
                " (a negative time: its larger backlog drained slower per event than the smaller one, so the runs "
                "were not alike and this rate says little)" if fixed < 0 else ""))
    if not parts:
        return []
    return [f"* **Marginal drain rate** ({point_label(small).rsplit(', ', 1)[0]}): " + "; ".join(parts)
            + f": the rate each further event of backlog drains at, and the time every drain takes whatever "
              f"its size (the phase's start, and the commits its last updates wait for), from the median drain "
              f"times of the {small.backlog:,}- and {large.backlog:,}-record backlogs (whole drains, no window of "
              f"one). A drain's last updates become visible at a commit, so its time is known to about one commit "
              f"interval."]


def _memory(summary: dict, base: Optional[PointKey]) -> list[str]:
    """A worker's peak RSS at each backlog, at the commit interval the other backlogs ran at: whether memory
    stays bounded as the backlog grows."""
    alike = [k for k in summary if base and (k.record_bytes, k.partitions, k.workers)
             == (base.record_bytes, base.partitions, base.workers)]
    larger = _larger_backlogs(summary, base)
    if not larger:
        return []
    keys = sorted((k for k in alike if k.interval_ms == larger[0].interval_ms), key=lambda k: k.backlog)
    parts = [f"{g} " + ", ".join(f"{figure(summary[k][g]['worker_peak_rss_mb']['median'])} MiB at {k.backlog:,}"
                                 for k in keys) for g in GUARANTEES]
    drains = ", ".join(f"{figure(summary[k]['exactly_once'][THROUGHPUT]['median'])} at {k.backlog:,}" for k in keys)
    return [f"* **A worker's peak RSS as the backlog grows** ({point_label(keys[0]).rsplit(', ', 1)[0]}): "
            + "; ".join(parts) + f" records (exactly_once drains {drains} events/s)."]


def _cost_split(summary: dict) -> Iterable[str]:
    yield "## Where exactly-once's cost comes from"
    yield ""
    yield ("* **Transactions**: exactly_once against at_least_once on the same path, paired per repeat: "
           "throughput ratio and worker CPU per event.")
    yield ("* **The commit interval**, paid by both guarantees: an event's records leave at its commit, so "
           "at_least_once's own latency is mostly the wait for two commits (one per hop).")
    yield ("* **read_committed visibility**: what exactly_once adds to that latency: the transactions' commit "
           "markers, and records held back behind the last stable offset (the LSO lag).")
    yield ""
    yield ("| point | EOS / ALO throughput | worker CPU s/1k, ALO → EOS | ALO latency p50 / p99 ms | "
           "EOS adds p50 / p99 ms | EOS LSO lag max records |")
    yield "|---|---|---|---|---|---|"
    for key, e in summary.items():
        alo, eos = e["at_least_once"], e["exactly_once"]
        yield (f"| {point_label(key)} | {spread_text(e['throughput_ratio'], 2)} | "
               f"{figure(alo['cpu.worker_s_per_1k_events']['median'], 2)} → "
               f"{figure(eos['cpu.worker_s_per_1k_events']['median'], 2)} | "
               f"{figure(alo['latency_ms.p50']['median'])} / {figure(alo['latency_ms.p99']['median'])} | "
               f"{_signed(e['latency_p50_added_ms']['median'])} / {_signed(e['latency_p99_added_ms']['median'])} | "
               f"{figure(eos['lso_lag.max_records']['median'])} |")
    yield ""


def _signed(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:+,.0f}"


def warm_up_lines(results: dict) -> Iterable[str]:
    """The Setup's line on the runs made before the measured ones (none in results from before they were made)."""
    runs = results.get("warm_up") or []
    if not runs:
        return
    each = "; ".join(
        f"{run['guarantee']} {figure(run['throughput']['drain_events_per_s'])} events/s, "
        f"{figure(run['cpu']['broker_s_per_1k_events'], 2)} broker CPU s per 1,000 events, "
        f"{'exact' if run['reconcile_ok'] and run['counts']['match'] else 'NOT exact'}" for run in runs)
    yield (f"* First, one run of each guarantee at {point_label(point_key(runs[0]['point']))}, not measured: a "
           "broker's first pipeline runs cost it more CPU per event than later ones, which would otherwise fall "
           f"on whichever measured runs came first ({each}).")


def _markdown(results: dict, summary: dict, references: dict, plots: dict[str, str]) -> Iterable[str]:
    meta = results["meta"]
    m = meta["machine"]
    args = meta["args"]
    yield "# What exactly-once costs: benchmark report"
    yield ""
    yield (f"Generated by `{meta['command']}` from {meta['started']} to {meta.get('finished', '?')} "
           f"({meta.get('minutes', '?')} min) on the local single-node broker. Raw results: "
           f"[`results.json`]({plots['results']}).")
    yield ""
    yield "## Findings"
    yield ""
    yield from headline(summary, references, results["meta"]["workload"]["latency_rate"])
    ordinary = summarise_line(results, "ordinary_app")
    yield from ordinary_app_findings(ordinary, summary)
    yield from quix_findings(summarise_line(results, "quix"), ordinary, summary, meta.get("quix_version"))
    yield ""
    yield ("An overhead is how much lower exactly_once's throughput is than at_least_once's (negative: "
           "exactly_once was faster). Both guarantees run the same code: every record an event sends, output or "
           "table write, is staged with it and produced at its commit through confluent-kafka, in one batch, on a "
           "worker thread. exactly_once wraps the batch and the input offsets in one transaction per worker; "
           "at_least_once produces the batch with an idempotent producer, waits for every acknowledgement, then "
           "commits the offsets to the group. So the overhead is what the transactions cost, and the split below "
           "separates it from what the commit interval costs both.")
    yield ""
    yield ("Numbers are medians over the repeats with [min–max] in brackets; overheads and latency costs are "
           "computed per repeat from the at_least_once and exactly_once runs measured side by side, then the "
           "median is taken. The machine is shared and noisy: read ratios, not absolute values.")
    yield ""
    yield "## Setup"
    yield ""
    yield (f"* Kafka {meta['kafka_version']} (KRaft, one node, `localhost`), broker settings from "
           "`tools/broker_files.py`.")
    yield (f"* Machine: {m['cores']} cores ({m['cpu_model']}), {m['memory_gib']} GiB memory, load average at "
           f"start {', '.join(f'{x:.2f}' for x in m['load_average_at_start'])}; shared with other workloads.")
    interpreter = f" (`{meta['python_executable']}`)" if meta.get("python_executable") else ""
    quix = (" (the Quix Streams line's, `.venv-quix/bin/python -m benchmarks.quix_two_hops`, on the same "
            "interpreter)" if results.get("quix") else "")
    yield (f"* Python {meta['python']}{interpreter}; workers are `faust -A app worker` processes started by "
           f"`tools.workers`{quix}.")
    w = meta["workload"]
    base, _ = interval_sweep(summary)
    others = sorted({k.backlog for k in summary} - {base.backlog}) if base else []
    backlog = f"{base.backlog:,}" if base else "?"
    if others:
        backlog += f" ({', '.join(f'{b:,}' for b in others)} at the first point too, for memory)"
    yield (f"* Each run: fresh topics; {w['warmup_events']} warm-up events (not measured), then a wait until every "
           "worker answers `/ready` (workers starting together join the group one by one); latency phase "
           f"{w['latency_rate']:g} events/s for {w['latency_seconds']:g} s; throughput phase a backlog of "
           f"{backlog} input records produced as fast as possible. Load from `app.loadgen` "
           "(5 % duplicates, 2 % bad records, 20 merchants), seed "
           f"{w['seed']}. Repeats: {args['repeats']}; order of the two guarantees alternates between repeats.")
    yield from warm_up_lines(results)
    yield (f"* Pipeline settings: transaction timeout {meta['pipeline_settings']['transaction_timeout_ms']}, "
           f"session timeout {meta['pipeline_settings']['session_timeout_s']:g} s, everything else the defaults "
           "(docs/configuration.md).")
    yield ""
    yield "## Method"
    yield ""
    yield ("* **Throughput**: the rate the backlog drains at: its events divided by the time from the start of "
           "the throughput phase to the last of their updates becoming visible to a read_committed reader of "
           "`merchant-totals` (start-up of the phase, commits and the last commit's tail included).")
    yield ("* **End-to-end latency** (latency phase): from the event's creation (`ts`, stamped by the load "
           "generator) to the first time its update of `merchant-totals` (which carries the `event_id`) is seen "
           "by a read_committed consumer running beside the pipeline. Each event crosses two transactions under "
           "exactly_once (ingest → `payments-by-merchant`, then aggregate → `merchant-totals`), so its update "
           "waits for two commits; under at_least_once too, as its records are produced at the commit, but "
           "without waiting for commit markers.")
    yield ("* **Commit latency**: the duration of each commit round the worker runs (timed by a Faust sensor, "
           "`app/commit_timer.py`, read from `/commits/`); under exactly_once one round is the worker's one "
           "transaction, holding every input partition with new events. *Partition commits/s* counts the input "
           "partitions committed (at_least_once: partition offsets committed).")
    yield ("* **CPU** per 1,000 input records over both measured phases, from `/proc/<pid>/stat` of the workers "
           "and of the broker; **peak RSS** is the worker's `VmHWM`.")
    yield ("* **LSO lag**: high watermark − LSO of every `merchant-totals` partition, from `list_offsets` every "
           "0.25 s, read_committed (the LSO) first, then read_uncommitted (the high watermark, never below it).")
    yield ("* **Reference lines** (same run, same records, same partitions): one idempotent confluent-kafka "
           "producer alone for the run's time, then one consumer alone reading it all back (the raw limit); "
           "the same producer with a transaction every commit interval, or every N records.")
    yield ""
    yield "## Throughput and latency"
    yield ""
    yield ("| point | ALO events/s | EOS events/s | EOS overhead | ALO p50 / p95 / p99 / max ms | "
           "EOS p50 / p95 / p99 / max ms | p50 added |")
    yield "|---|---|---|---|---|---|---|"
    for key, e in summary.items():
        lat = {g: " / ".join(figure(e[g][f"latency_ms.{q}"]["median"]) for q in ("p50", "p95", "p99", "max"))
               for g in GUARANTEES}
        yield (f"| {point_label(key)} | {spread_text(e['at_least_once'][THROUGHPUT])} | "
               f"{spread_text(e['exactly_once'][THROUGHPUT])} | {_pct(e['throughput_overhead_pct'])} | "
               f"{lat['at_least_once']} | {lat['exactly_once']} | {_signed(e['latency_p50_added_ms']['median'])} ms |")
    yield ""
    if "throughput" in plots:
        yield f"![throughput vs commit interval]({plots['throughput']})"
        yield ""
    if "points" in plots:
        yield f"![throughput at every point]({plots['points']})"
        yield ""
    if "latency" in plots:
        yield f"![latency CDFs]({plots['latency']})"
        yield ""
    yield from _cost_split(summary)
    yield "## Commits, CPU, memory, LSO lag"
    yield ""
    yield ("Worker cores while draining: the CPU a worker used from the backlog's first event to its last update, "
           "over that time, all its threads counted. Near 1.0 it is bound by one core: "
           "Python runs one thread at a time, "
           "and the event-loop thread does most of the work.")
    yield ""
    yield ("| point | guarantee | commit p50 / p99 ms | commit rounds/s | partition commits/s | worker CPU s/1k | "
           "worker cores while draining | broker CPU s/1k | worker peak RSS MiB | LSO lag max / mean records |")
    yield "|---|---|---|---|---|---|---|---|---|---|"
    for key, e in summary.items():
        for g in GUARANTEES:
            x = e[g]
            yield (f"| {point_label(key)} | {SHORT[g]} | {figure(x['commits.p50_ms']['median'], 1)} / "
                   f"{figure(x['commits.p99_ms']['median'], 1)} | {figure(x['commits.rounds_per_s']['median'], 1)} | "
                   f"{figure(x['commits.partition_commits_per_s']['median'], 1)} | "
                   f"{figure(x['cpu.worker_s_per_1k_events']['median'], 2)} | "
                   f"{figure(x['cpu.worker_cores_while_draining']['median'], 2)} | "
                   f"{figure(x['cpu.broker_s_per_1k_events']['median'], 2)} | "
                   f"{figure(x['worker_peak_rss_mb']['median'])} | {figure(x['lso_lag.max_records']['median'])} / "
                   f"{figure(x['lso_lag.mean_records']['median'], 1)} |")
    yield ""
    yield "## Reference lines: the broker alone, idempotent vs transactional producer"
    yield ""
    yield ("| records | producer alone, records/s | consumer alone, records/s | transactions | records/s | "
           "records per transaction | vs idempotent |")
    yield "|---|---|---|---|---|---|---|"
    for ref in references.values():
        first = True
        for setting, t in ref["transactional"].items():
            head = (f"| ~{ref['mean_record_bytes']:,.0f} B | {spread_text(ref['producer'])} | "
                    f"{spread_text(ref['consumer'])} "
                    if first else "| | | ")
            first = False
            yield (f"{head}| {_tx_label(setting)} | {spread_text(t['records_per_s'])} | "
                   f"{figure(t['records_per_transaction']['median'])} | {_pct(t['overhead_pct'])} |")
    yield ""
    yield ("Kafka's designers reported about 3 % lower producer throughput for 1 KB records in 100 ms "
           "transactions. The row *~1,024 B, every 100 ms* above is the same measurement on this machine "
           "(a negative overhead means the transactional run was faster: within the noise).")
    yield ""
    yield from profile_section(results)
    yield from long_transaction_section(results, plots)
    yield from sanity_section(results)
