"""An ordinary Faust app, as Faust's documentation teaches it, on ``eos://`` with nothing else changed.

The app is the benchmarks' two-hop app (:mod:`benchmarks.two_hops`): per-event agents,
``faust.Record`` values, Faust's own topics and tables. Its worker starts on a
100,000-record backlog (far above ``max_uncommitted_records``, so commits start early
and carry thousands of records each) and must drain it to the end, every update of
every merchant's total checked by ``reconcile`` from the committed input.
"""
from __future__ import annotations

import pytest

from app.loadgen import LoadSpec
from benchmarks.measure import OutputWatcher

pytestmark = pytest.mark.broker

BACKLOG = 100_000
DRAIN_S = 900  # generous: the machine is shared; this bounds a stall, it is not a timing check


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_an_ordinary_faust_app_drains_a_large_backlog_to_the_end_with_every_update_exact(pipeline, guarantee):
    run = pipeline(guarantee)
    load = run.produce(LoadSpec(count=BACKLOG, seed=21))
    watcher = OutputWatcher(run.settings, run.settings.totals_topic)
    watcher.start()
    try:
        run.add_worker("benchmarks.ordinary_eos")
        watcher.wait_for_seed(21, load.by_kind["valid"], DRAIN_S, lambda done, total: None)
    finally:
        watcher.stop()

    report = run.reconcile()
    totals_problems = {name: found for name, found in report["problems"].items() if name.startswith("totals:")}
    assert totals_problems == {}  # the app has no windows and no dead letters: the rest does not apply
    assert report["counted_events"] == load.by_kind["valid"] == report["total_updates"]
    assert "Giving up" not in run.workers[0].log_text()  # busy, it never gave its partitions up
    assert run.stop_all() == {"worker-0": 0}
