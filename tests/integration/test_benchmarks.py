"""The benchmark command's quick mode on the real broker: it produces its report, and the numbers
in it are present, sane and agree with reconcile. Nothing here checks how fast anything is."""
from __future__ import annotations

import json

import pytest

from benchmarks import profile
from benchmarks.run import main

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def quick_run(session_broker, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    assert main(["--quick", "--out", str(out), "--report", str(out / "report.md")]) == 0
    return out, json.loads((out / "results.json").read_text())


def test_report_and_plots_are_written(quick_run):
    out, _ = quick_run
    for name in ("report.md", "results.json", "throughput.png", "latency_cdf.png", "lso_lag.png"):
        assert (out / name).stat().st_size > 0, name
    report = (out / "report.md").read_text()
    assert "## Findings" in report and "100 ms commit interval" in report
    assert "Kafka 4" in report or "Kafka 3" in report


def test_a_warm_up_run_of_each_guarantee_comes_first_is_not_measured_and_is_named_in_the_setup(quick_run):
    out, results = quick_run
    assert [run["guarantee"] for run in results["warm_up"]] == ["at_least_once", "exactly_once"]
    assert all(run["counts"]["match"] and run["reconcile_ok"] for run in results["warm_up"])
    assert "* First, one run of each guarantee at 100 ms" in (out / "report.md").read_text()


def test_both_guarantees_measured_with_sane_numbers(quick_run):
    _, results = quick_run
    assert sorted(r["guarantee"] for r in results["pipeline"]) == ["at_least_once", "exactly_once"]
    for run in results["pipeline"]:
        assert run["throughput"]["drain_events_per_s"] > 0
        latency = run["latency_ms"]
        assert latency["events"] > 0 and 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
        assert run["commits"]["rounds"] > 0 and run["commits"]["p50_ms"] > 0
        assert run["cpu"]["worker_s_per_1k_events"] > 0 and run["cpu"]["broker_s_per_1k_events"] > 0
        assert run["worker_peak_rss_mb"] > 0
        assert set(run["exit_codes"].values()) == {0}


def test_benchmark_counts_equal_reconciles_counts(quick_run):
    _, results = quick_run
    for run in results["pipeline"]:
        counts = run["counts"]
        assert counts["visible_events"] == counts["reconcile_counted_events"] > 0
        assert counts["visible_updates"] == counts["reconcile_total_updates"]
        assert run["reconcile_ok"], run["reconcile_problems"]


def test_reference_lines_are_measured(quick_run):
    _, results = quick_run
    (reference,) = results["reference"]
    assert reference["raw"]["records_per_s"] > 0 and reference["raw"]["consumer_records_per_s"] > 0
    assert reference["transactional"] and all(t["transactions"] > 0 for t in reference["transactional"])


def test_stock_faust_drains_the_same_backlog_to_the_same_counts(quick_run):
    out, results = quick_run
    (stock,) = results["stock_faust"]
    assert stock["throughput"]["drain_events_per_s"] > 0 and set(stock["exit_codes"].values()) == {0}
    assert stock["counts"]["visible_events"] == stock["counts"]["reconcile_counted_events"] > 0
    assert stock["counts"]["visible_updates"] == stock["counts"]["reconcile_total_updates"]
    assert "Stock Faust, 100 ms commit interval" in (out / "report.md").read_text()


def test_quix_streams_drains_the_same_backlog_under_each_guarantee_to_the_same_counts(quick_run):
    out, results = quick_run
    assert sorted(run["guarantee"] for run in results["quix"]) == ["quix_at_least_once", "quix_exactly_once"]
    for run in results["quix"]:
        assert run["throughput"]["drain_events_per_s"] > 0 and set(run["exit_codes"].values()) == {0}
        assert run["point"]["workers"] == 1 and run["point"]["backlog"] == 3_000
        assert run["counts"]["visible_events"] == run["counts"]["reconcile_counted_events"] > 0
        assert run["counts"]["visible_updates"] == run["counts"]["reconcile_total_updates"]
        # it writes no windows and no dead letters: reconcile's every other problem is one of those
        assert all(problem.startswith(("windows:", "dlq:")) for problem in run["reconcile_problems"])
    version = results["meta"]["quix_version"]
    assert version.startswith("3.") and f"* **Quix Streams {version}** (" in (out / "report.md").read_text()


def test_each_guarantee_has_a_profiled_run_whose_samples_are_the_event_loop_s(quick_run):
    out, results = quick_run
    assert sorted(run["guarantee"] for run in results["profiles"]) == ["at_least_once", "exactly_once"]
    for run in results["profiles"]:
        sampled = run["profile"]
        assert sampled["samples"] > 0 and sum(sampled["own"].values()) == pytest.approx(1.0)
        assert sampled["within"]["agent `ingest`"] > 0  # the agent ran while it was sampled
        assert sampled["threads"][profile.EVENT_LOOP_THREAD]["cores"] > 0  # and used CPU on its event loop
        assert sum(used["share"] for used in sampled["threads"].values()) == pytest.approx(1.0)
        assert run["counts"]["match"] and run["reconcile_ok"]
    report = (out / "report.md").read_text()
    assert "## Where a worker's time goes: a profile" in report and "| worker CPU by thread" in report


def test_stalled_transaction_pins_the_lso_until_aborted_by_hand(quick_run):
    _, results = quick_run
    (scenario,) = results["long_transaction"]
    assert scenario["mode"] == "manual"
    sanity = scenario["sanity"]
    assert sanity["lso_pinned_at_stalled_record"] and sanity["pipeline_kept_writing_behind_it"]
    assert sanity["reader_got_nothing_from_partition_0"] and sanity["reader_got_other_partitions"]
    assert sanity["cleared"] and scenario["cleared_at_s"] > scenario["aborted_at_s"] > scenario["stalled_at_s"]
    assert scenario["max_lag_records"] > 0
    abort = scenario["commands"][-1]
    assert "abort-transaction" in abort["command"] and abort["exit_code"] == 0
    assert scenario["counts"]["match"] and scenario["reconcile_ok"]
