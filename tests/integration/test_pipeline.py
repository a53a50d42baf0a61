"""The pipeline on the real broker: every input record ends up counted once,
dropped as a duplicate, or dead-lettered, under both processing guarantees."""
from __future__ import annotations

import re

import pytest
from worker_metrics import scrape, value

from app.loadgen import LoadSpec
from tools.workers import wait_for

pytestmark = pytest.mark.broker

GUARANTEES = ["exactly_once", "at_least_once"]
DRAIN_S = 180  # generous: the machine is shared; this bounds a hang, it is not a timing check
TOOK_PARTITIONS = re.compile(r"Resuming from committed offsets: \S")


def assert_reconciled(report: dict) -> None:
    assert report["ok"], report["problems"]


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_duplicates_and_bad_records_reconcile_exactly(pipeline, guarantee):
    run = pipeline(guarantee)
    load = run.produce(LoadSpec(count=4_000, seed=11, duplicate_rate=0.1, bad_rate=0.05))
    assert load.by_kind["duplicate"] > 0 and load.by_kind["conflict"] > 0
    run.add_worker()

    report = run.reconcile(wait_s=DRAIN_S)

    assert_reconciled(report)
    assert report["counted_events"] == load.by_kind["valid"]
    assert report["dead_letters"] == sum(n for kind, n in load.by_kind.items() if kind not in ("valid", "duplicate"))
    assert run.stop_all() == {"worker-0": 0}


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_a_backlog_far_above_max_uncommitted_records_pauses_input_and_reconciles_exactly(pipeline, guarantee):
    run = pipeline(guarantee, MAX_UNCOMMITTED_RECORDS="300")
    load = run.produce(LoadSpec(count=6_000, seed=12))
    worker = run.add_worker()

    report = run.reconcile(wait_s=DRAIN_S)

    assert_reconciled(report)
    assert report["counted_events"] == load.by_kind["valid"]
    assert value(scrape(worker), "faust_eos_input_paused_seconds_total") > 0
    assert run.stop_all() == {"worker-0": 0}


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_second_worker_joining_mid_stream_keeps_totals_exact(pipeline, guarantee):
    run = pipeline(guarantee)
    first = run.add_worker()
    run.produce(LoadSpec(count=3_000, seed=12, rate=1_500))
    wait_for(lambda: run.reconcile()["total_updates"] > 500, timeout=DRAIN_S, what="the first worker's output")

    second = run.add_worker()
    run.produce(LoadSpec(count=3_000, seed=13, rate=1_500))
    wait_for(lambda: TOOK_PARTITIONS.search(second.log_text()), timeout=DRAIN_S, what="the second worker's partitions")
    run.produce(LoadSpec(count=3_000, seed=16, rate=1_500))
    report = run.reconcile(wait_s=DRAIN_S)

    if guarantee == "exactly_once":
        assert_reconciled(report)
    else:  # at-least-once may repeat updates around a hand-over, but must not lose any
        lost = {kind for kind in report["problems"] if "lost event" in kind or kind == "dlq: missing"}
        assert not lost, report["problems"]
    assert first.alive() and second.alive()
    assert run.stop_all() == {"worker-0": 0, "worker-1": 0}


def test_restarted_worker_resumes_from_its_committed_state(pipeline):
    run = pipeline("exactly_once")
    run.produce(LoadSpec(count=2_000, seed=14))
    worker = run.add_worker()
    assert_reconciled(run.reconcile(wait_s=DRAIN_S))
    assert worker.stop() == 0

    run.produce(LoadSpec(count=2_000, seed=15))
    restarted = run.add_worker(DATA_DIR=worker.env["DATA_DIR"])

    assert_reconciled(run.reconcile(wait_s=DRAIN_S))
    assert "not clean" not in restarted.log_text()
