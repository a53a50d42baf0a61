"""The report's findings on the two-hop apps run beside the pipeline with one worker: the ordinary Faust
app on faust-eos (:mod:`benchmarks.ordinary_eos`) and the same two hops written with Quix Streams
(:mod:`benchmarks.quix_two_hops`), each under both guarantees (:func:`benchmarks.summary.summarise_line`)."""
from __future__ import annotations

from typing import Optional

from benchmarks.sections import figure, spread_text
from benchmarks.summary import THROUGHPUT, PointKey, point_label, ratio


def _line_point(line: dict) -> PointKey:
    """The point a one-worker line (:func:`benchmarks.summary.summarise_line`) ran at."""
    return next(iter(line.values()))["point"]


def _line_rates(line: dict) -> str:
    """A one-worker line's rate and worker CPU per event under each guarantee it ran under."""
    return "; ".join(
        f"{guarantee} {spread_text(runs[THROUGHPUT])} events/s "
        f"({figure(runs['cpu.worker_s_per_1k_events']['median'], 2)} worker CPU s per 1,000 events"
        + ("" if runs["counts_match"] else ", counts not all matching reconcile's") + ")"
        for guarantee, runs in sorted(line.items()))


def _pipeline_beside(key: PointKey, summary: dict) -> str:
    """The pipeline's exactly_once rate with ``key``'s knobs (its smallest backlog), or nothing if not run."""
    same_knobs = sorted((k for k in summary if k._replace(backlog=key.backlog) == key), key=lambda k: k.backlog)
    return (f"; the pipeline's exactly_once with the same knobs and a {same_knobs[0].backlog:,}-record backlog: "
            f"{spread_text(summary[same_knobs[0]]['exactly_once'][THROUGHPUT])} events/s" if same_knobs else "")


def ordinary_app_findings(ordinary: dict, summary: dict) -> list[str]:
    """The ordinary Faust app's line: its rate under each guarantee, beside the pipeline's exactly_once."""
    if not ordinary:
        return []
    key = _line_point(ordinary)
    return [f"* **An ordinary Faust app on faust-eos** (the stock Faust line's two hops, per-event agents with "
            f"Faust's own topics and tables, only `eos://` and `eos-rocksdb://` changed: `benchmarks/ordinary_eos.py`; "
            f"{point_label(key)}): {_line_rates(ordinary)}{_pipeline_beside(key, summary)}."]


def quix_findings(quix: dict, ordinary: dict, summary: dict, version: Optional[str] = None) -> list[str]:
    """The Quix Streams line: its rate under each guarantee, beside the ordinary Faust app's on faust-eos (run at
    the same point) and the pipeline's exactly_once."""
    if not quix:
        return []
    key = _line_point(quix)
    faust_eos = [f"{guarantee} {spread_text(ordinary[guarantee][THROUGHPUT])} events/s "
                 f"({figure(ratio(ordinary[guarantee][THROUGHPUT]['median'], runs[THROUGHPUT]['median']), 2)}× "
                 "Quix Streams' rate)" for guarantee, runs in sorted(quix.items()) if guarantee in ordinary]
    beside = "; the ordinary Faust app on faust-eos: " + ", ".join(faust_eos) if faust_eos else ""
    return [f"* **Quix Streams{' ' + version if version else ''}** (the same two hops written with Quix Streams: "
            f"stateful dedup and running totals, `group_by` to re-key, in a virtualenv of its own: "
            f"`benchmarks/quix_two_hops.py`; {point_label(key)}): {_line_rates(quix)}{beside}"
            f"{_pipeline_beside(key, summary)}."]
