"""Statistics and planning of the benchmarks (no broker)."""
import pytest

from benchmarks import stats
from benchmarks.pipeline import Point
from benchmarks.report import headline
from benchmarks.run import parse_args, points
from benchmarks.summary import point_key, summarise, summarise_line, with_backlogs
from benchmarks.two_hop_findings import ordinary_app_findings, quix_findings


def test_percentile_interpolates_between_ranks():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([5], 99) == 5
    assert stats.percentile([], 50) is None
    assert stats.percentile([3, 1, 2], 100) == 3


def test_summary_has_max_and_asked_quantiles():
    result = stats.summary(list(range(101)))
    assert result == {"p50": 50, "p95": 95, "p99": 99, "max": 100}


def test_spread_ignores_missing_repeats():
    assert stats.spread([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert stats.spread([None])["median"] is None


def test_drain_rate_counts_from_the_start_to_the_last_completion():
    times = [i / 100 for i in range(1, 1001)]  # 100 events/s for 10 s
    assert stats.drain_rate(times, started=0.0) == pytest.approx(100)


def test_drain_rate_does_not_take_a_late_burst_for_a_rate():
    # nothing for 9 s, then 1,000 events in the last second: 100 events/s over the drain, not 1,000
    times = [9 + i / 1000 for i in range(1, 1001)]
    assert stats.drain_rate(times, started=0.0) == pytest.approx(100)


def test_drain_rate_needs_completions_after_the_start():
    assert stats.drain_rate([], started=0.0) is None
    assert stats.drain_rate([1.0, 2.0], started=2.0) is None


def test_marginal_drain_rate_separates_the_rate_of_each_further_event_from_the_time_every_drain_takes():
    # 2 s whatever the size, then 10,000 events/s
    rate, fixed = stats.marginal_drain_rate((50_000, 2 + 5.0), (200_000, 2 + 20.0))
    assert rate == pytest.approx(10_000) and fixed == pytest.approx(2)


def test_marginal_drain_rate_needs_a_larger_backlog_that_took_longer():
    assert stats.marginal_drain_rate((50_000, 5.0), (200_000, 5.0)) is None
    assert stats.marginal_drain_rate((50_000, 5.0), (50_000, 6.0)) is None


def test_overhead_is_positive_when_slower():
    assert stats.overhead_pct(200, 150) == 25
    assert stats.overhead_pct(100, 110) == pytest.approx(-10)
    assert stats.overhead_pct(None, 1) is None and stats.overhead_pct(0, 1) is None


def test_cdf_points_end_at_one():
    cdf = stats.cdf_points(list(range(1000)), points=10)
    assert cdf[-1] == [999, 1.0] and len(cdf) <= 11
    assert [p[0] for p in cdf] == sorted(p[0] for p in cdf)


def test_plan_sweeps_intervals_then_each_other_knob_alone():
    args = parse_args(["--commit-intervals", "100,500", "--record-sizes", "0,1024", "--workers", "1,2",
                       "--throughput-events", "5000,20000"])
    assert points(args) == [Point(100, 0, 6, 1, 5000), Point(500, 0, 6, 1, 5000), Point(100, 1024, 6, 1, 5000),
                            Point(100, 0, 6, 2, 5000), Point(100, 0, 6, 1, 20000)]


def test_quick_mode_is_one_point():
    args = parse_args(["--quick"])
    assert points(args) == [Point(100, 0, 6, 1, 3000)] and args.repeats == 1


def _run(guarantee: str, backlog: int, rss_mb: float, repeat: int = 0, **point: int) -> dict:
    """A pipeline run's result as ``results.json`` holds it, with only what the summary needs."""
    knobs = {"commit_interval_ms": 1000, "record_bytes": 0, "partitions": 6, "workers": 1, "backlog": backlog}
    return {"guarantee": guarantee, "repeat": repeat, "point": {**knobs, **point},
            "throughput": {"drain_events_per_s": 4000.0}, "worker_peak_rss_mb": rss_mb,
            "latency_ms": {"p50": 1000.0, "cdf": [[1000.0, 1.0]]}}


def test_findings_show_peak_memory_at_each_backlog_of_the_first_point():
    runs = [_run(g, backlog, rss) for g in ("at_least_once", "exactly_once")
            for backlog, rss in ((50_000, 300.0), (200_000, 320.0))]
    runs += [_run(g, 50_000, 900.0, workers=2) for g in ("at_least_once", "exactly_once")]
    runs += [_run(g, 50_000, 800.0, commit_interval_ms=100) for g in ("at_least_once", "exactly_once")]
    summary = summarise({"pipeline": runs})
    (memory,) = [line for line in headline(summary, {}) if "peak RSS as the backlog grows" in line]
    assert "exactly_once 300 MiB at 50,000, 320 MiB at 200,000" in memory
    assert "900" not in memory and "800" not in memory  # other workers, another commit interval: other points


def test_findings_show_the_longer_drain_of_the_first_point_beside_the_sweep():
    runs = [_run(g, backlog, 300.0) for g in ("at_least_once", "exactly_once") for backlog in (50_000, 200_000)]
    runs += [_run(g, 200_000, 300.0, workers=2) for g in ("at_least_once", "exactly_once")]
    findings = headline(summarise({"pipeline": runs}), {})
    longer = [line for line in findings if line.startswith("* **1 s, ~130 B, 6 p, 1 w, 200,000 backlog** (a longer")]
    assert len(longer) == 1 and "ratio 1.00" in longer[0]
    assert not any("2 w, 200,000 backlog** (a longer" in line for line in findings)  # another point, not the first's


def test_results_recorded_before_points_had_a_backlog_take_the_workloads():
    old = _run("exactly_once", 0, 300.0)
    del old["point"]["backlog"]
    results = with_backlogs({"meta": {"workload": {"throughput_events": 40_000}}, "pipeline": [old]})
    assert point_key(results["pipeline"][0]["point"]).backlog == 40_000


@pytest.mark.parametrize("bad", [["--commit-intervals", "fast"], ["--record-sizes", "100000"], ["--repeats", "0"],
                                 ["--throughput-events", "0"]])
def test_bad_flags_are_refused(bad):
    with pytest.raises(SystemExit):
        parse_args(bad)


def test_the_report_takes_the_marginal_drain_rate_from_the_backlogs_run_at_one_commit_interval():
    from benchmarks.report import _marginal_drain
    from benchmarks.summary import PointKey, interval_sweep

    def drained(events: float, seconds: float) -> dict:
        run = {"drained_events": {"median": events}, "drain_s": {"median": seconds}}
        return {"at_least_once": run, "exactly_once": run}

    summary = {  # the larger backlog ran at the first point (1 s) alone; the sweep also has 100 ms
        PointKey(100, 0, 6, 1, 50_000): drained(46_000, 30.0),
        PointKey(1000, 0, 6, 1, 50_000): drained(46_000, 2 + 4.6),
        PointKey(1000, 0, 6, 1, 200_000): drained(186_000, 2 + 18.6),
    }
    base, _ = interval_sweep(summary)
    [line] = _marginal_drain(summary, base)
    assert "(1 s, ~130 B, 6 p, 1 w)" in line
    assert "at_least_once 10,000 events/s plus 2.0 s; exactly_once 10,000 events/s plus 2.0 s" in line

    summary[PointKey(1000, 0, 6, 1, 50_000)]["at_least_once"] = {  # not run at the smaller backlog
        "drained_events": {"median": None}, "drain_s": {"median": None}}
    [line] = _marginal_drain(summary, base)
    assert "at_least_once" not in line and "exactly_once 10,000 events/s" in line

    # the larger backlog drained slower per event than the smaller one: a time below zero, said to mean little
    summary[PointKey(1000, 0, 6, 1, 200_000)]["exactly_once"] = drained(186_000, 30.0)["exactly_once"]
    [line] = _marginal_drain(summary, base)
    assert "exactly_once 5,983 events/s plus -1.1 s (a negative time: its larger backlog drained slower" in line


def test_the_setup_names_the_unmeasured_warm_up_runs_and_what_the_broker_spent_on_them():
    from benchmarks.report import warm_up_lines
    point = {"commit_interval_ms": 1000, "record_bytes": 0, "partitions": 6, "workers": 1, "backlog": 50000}

    def warm_up(guarantee: str, events_per_s: float, broker_s: float, exact: bool) -> dict:
        return {"guarantee": guarantee, "point": point, "cpu": {"broker_s_per_1k_events": broker_s},
                "throughput": {"drain_events_per_s": events_per_s}, "counts": {"match": True}, "reconcile_ok": exact}

    [line] = warm_up_lines({"warm_up": [warm_up("at_least_once", 6651.2, 0.118, True),
                                        warm_up("exactly_once", 11636.0, 0.087, False)]})
    assert line.startswith("* First, one run of each guarantee at 1 s, ~130 B, 6 p, 1 w, 50,000 backlog, not measured")
    assert line.endswith("(at_least_once 6,651 events/s, 0.12 broker CPU s per 1,000 events, exact; "
                         "exactly_once 11,636 events/s, 0.09 broker CPU s per 1,000 events, NOT exact).")
    assert list(warm_up_lines({})) == []  # results from before the warm-up runs were made


def test_findings_show_the_ordinary_faust_app_under_each_guarantee_beside_the_pipeline():
    def ordinary(line: str, rate: float, match: bool = True) -> dict:
        return {**_run(line, 100_000, 200.0), "throughput": {"drain_events_per_s": rate},
                "cpu": {"worker_s_per_1k_events": 0.5}, "counts": {"match": match}}

    results = {"ordinary_app": [ordinary("ordinary_exactly_once", 1800.0), ordinary("ordinary_exactly_once", 1600.0),
                                ordinary("ordinary_at_least_once", 1500.0, match=False)]}
    pipeline = summarise({"pipeline": [_run(g, 50_000, 300.0) for g in ("at_least_once", "exactly_once")]})
    (line,) = ordinary_app_findings(summarise_line(results, "ordinary_app"), pipeline)
    assert "1 w, 100,000 backlog" in line
    assert "at_least_once 1,500 events/s (0.50 worker CPU s per 1,000 events, counts not all matching" in line
    assert "exactly_once 1,700 [1,600–1,800] events/s (0.50 worker CPU s per 1,000 events)" in line
    assert line.endswith("same knobs and a 50,000-record backlog: 4,000 events/s.")
    assert ordinary_app_findings(summarise_line({}, "ordinary_app"), pipeline) == []


def _one_worker_run(line: str, rate: float, cpu: float = 0.5, match: bool = True) -> dict:
    return {**_run(line, 100_000, 200.0), "throughput": {"drain_events_per_s": rate},
            "cpu": {"worker_s_per_1k_events": cpu}, "counts": {"match": match}}


def test_the_quix_streams_line_is_summarised_per_guarantee_apart_from_the_ordinary_app():
    results = {"quix": [_one_worker_run("quix_exactly_once", 900.0), _one_worker_run("quix_exactly_once", 1100.0),
                        _one_worker_run("quix_at_least_once", 2000.0, match=False)],
               "ordinary_app": [_one_worker_run("ordinary_exactly_once", 5000.0)]}
    quix = summarise_line(results, "quix")
    assert quix["exactly_once"]["throughput.drain_events_per_s"] == {"median": 1000.0, "min": 900.0, "max": 1100.0,
                                                                     "n": 2}
    assert quix["exactly_once"]["runs"] == 2 and quix["exactly_once"]["counts_match"]
    assert quix["at_least_once"]["runs"] == 1 and not quix["at_least_once"]["counts_match"]
    assert point_key(results["quix"][0]["point"]) == quix["exactly_once"]["point"]
    assert summarise_line(results, "ordinary_app").keys() == {"exactly_once"}
    assert summarise_line({}, "quix") == {}


def test_findings_show_quix_streams_under_each_guarantee_beside_the_ordinary_app_and_the_pipeline():
    results = {"quix": [_one_worker_run("quix_exactly_once", 1000.0, cpu=0.8),
                        _one_worker_run("quix_at_least_once", 2000.0)],
               "ordinary_app": [_one_worker_run("ordinary_exactly_once", 3000.0),
                                _one_worker_run("ordinary_at_least_once", 3000.0)]}
    pipeline = summarise({"pipeline": [_run(g, 50_000, 300.0) for g in ("at_least_once", "exactly_once")]})
    ordinary = summarise_line(results, "ordinary_app")
    (line,) = quix_findings(summarise_line(results, "quix"), ordinary, pipeline, "3.28.0")
    assert line.startswith("* **Quix Streams 3.28.0** (") and "1 w, 100,000 backlog" in line
    assert ("): at_least_once 2,000 events/s (0.50 worker CPU s per 1,000 events); exactly_once 1,000 events/s "
            "(0.80 worker CPU s per 1,000 events); the ordinary Faust app on faust-eos: at_least_once 3,000 events/s "
            "(1.50× Quix Streams' rate), exactly_once 3,000 events/s (3.00× Quix Streams' rate); ") in line
    assert line.endswith("same knobs and a 50,000-record backlog: 4,000 events/s.")
    (alone,) = quix_findings(summarise_line(results, "quix"), {}, {})  # run with --no-ordinary-app, no version
    assert alone.startswith("* **Quix Streams** (") and "ordinary" not in alone and alone.endswith("events).")
    assert quix_findings({}, ordinary, pipeline) == []


def test_the_quix_streams_lines_need_their_virtualenv_or_no_quix(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("benchmarks.run.QUIX_PYTHON", tmp_path / "missing" / "python")
    with pytest.raises(SystemExit):
        parse_args(["--quick", "--no-profile"])
    assert "scripts/setup-quix, or pass --no-quix" in capsys.readouterr().err
    assert not parse_args(["--quick", "--no-profile", "--no-quix"]).quix
