"""An ordinary Faust app on eos:// stays exact through each fault of the short matrix in the middle of a
backlog (and under at_least_once loses nothing when a worker crashes).

The app is the benchmarks' two-hop app (:mod:`benchmarks.two_hops`): per-event agents
on Faust's own topics and tables, whose records reach them a fetched batch at a
time (:mod:`faust_eos.short_paths.unpacking`). Two workers drain a backlog; while they do, one
is killed with SIGKILL and restarted; or a third joins and one leaves; or one is
paused (SIGSTOP) until the group has moved its partitions to the other, then
woken to find its work fenced; or the broker is killed and started again. Batches
are cut short in the middle. ``reconcile`` then checks every update of every
merchant's total against the committed input.
"""
from __future__ import annotations

import contextlib
import signal

import pytest

from app.loadgen import LoadSpec
from benchmarks.measure import OutputWatcher
from tests.faults.broker_restarts import broker_restarted

pytestmark = pytest.mark.broker

APP = "benchmarks.ordinary_eos"
BACKLOG = 30_000
WAIT_S = 600  # generous: the machine is shared; this bounds a stall, it is not a timing check


def drain_through(run, fault: str) -> int:
    """Two workers drain a backlog while ``fault`` happens to them; how many valid events it held."""
    load = run.produce(LoadSpec(count=BACKLOG, seed=41))
    valid = load.by_kind["valid"]
    watcher = OutputWatcher(run.settings, run.settings.totals_topic)
    watcher.start()
    try:
        with contextlib.ExitStack() as restarted:
            first, _ = run.add_worker(APP), run.add_worker(APP)
            watcher.wait_for_seed(41, valid // 4, WAIT_S)
            if fault == "kill":
                first.kill()
                first.start()
            elif fault == "rebalance":
                third = run.add_worker(APP)
                watcher.wait_for_seed(41, valid // 2, WAIT_S)
                assert first.stop() == 0
                run.workers.remove(first)
                assert third.alive()
            elif fault == "zombie":
                first.signal(signal.SIGSTOP)
                try:  # three quarters need some of its partitions: the group gave them to the other worker
                    watcher.wait_for_seed(41, valid * 3 // 4, WAIT_S)
                finally:
                    first.signal(signal.SIGCONT)  # it wakes with work of a generation that has passed
            else:
                restarted.enter_context(broker_restarted(run.settings))
            watcher.wait_for_seed(41, valid, WAIT_S)
    finally:
        watcher.stop()
    return valid


@pytest.mark.parametrize("fault", ["kill", "rebalance", "zombie", "broker-kill"])
def test_an_ordinary_faust_app_stays_exact_through_a_fault_in_the_middle_of_a_backlog(pipeline, fault):
    run = pipeline("exactly_once")
    valid = drain_through(run, fault)

    report = run.reconcile(wait_s=30)
    assert {name: found for name, found in report["problems"].items() if name.startswith("totals:")} == {}
    assert report["counted_events"] == valid == report["total_updates"]
    assert [w.name for w in run.workers if "Error in recovery" in w.log_text()] == []  # tables restored cleanly
    assert all(code == 0 for code in run.stop_all().values())


def test_under_at_least_once_an_ordinary_faust_app_killed_in_the_middle_of_a_backlog_loses_nothing(pipeline):
    run = pipeline("at_least_once")
    valid = drain_through(run, "kill")

    report = run.reconcile(wait_s=30)
    assert "totals: lost event" not in report["problems"]  # repeated updates are this guarantee's price
    assert report["counted_events"] == valid
    assert all(code == 0 for code in run.stop_all().values())
