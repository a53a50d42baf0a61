"""Table state on the real broker: a restart restores only what its checkpoint lacks, and bad local state is rebuilt.

Tables hold only committed state, with the changelog offset it reflects, so a
worker that stops (cleanly or by SIGKILL) and starts again on its data
directory restores only the changelog records past that offset.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from app.loadgen import LoadSpec
from faust_eos.store import CHECKPOINT_KEY
from tools.workers import wait_for
from worker_metrics import is_ready, scrape, value

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
RESTORED = "faust_eos_changelog_records_restored_total"


def restart(run, worker, how: str):
    """Stop ``worker`` as told and start a new one on its data directory, once it is ready."""
    if how == "stop":
        assert worker.stop() == 0
    else:
        worker.kill()
    again = run.add_worker(DATA_DIR=worker.env["DATA_DIR"])
    wait_for(lambda: is_ready(again), timeout=DRAIN_S, what="the restarted worker to be ready")
    return again


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_restarted_worker_restores_nothing_its_checkpoints_already_hold(pipeline, guarantee, how):
    run = pipeline(guarantee)
    run.produce(LoadSpec(count=3_000, seed=31, duplicate_rate=0.1))
    worker = run.add_worker()
    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"] or guarantee == "at_least_once", report["problems"]
    assert value(scrape(worker), RESTORED) == 0  # the changelogs were empty at its start

    again = restart(run, worker, how)

    # everything it held was committed and checkpointed before it stopped
    assert value(scrape(again), RESTORED) == 0
    run.produce(LoadSpec(count=2_000, seed=32, duplicate_rate=0.1))
    report = run.reconcile(wait_s=DRAIN_S)
    if guarantee == "exactly_once":
        assert report["ok"], report["problems"]
    else:
        assert not [kind for kind in report["problems"] if "lost event" in kind], report["problems"]


def stopped_after_a_load(run, seed: int):
    """A worker that processed a load exactly and then stopped cleanly."""
    run.produce(LoadSpec(count=2_000, seed=seed))
    worker = run.add_worker()
    assert run.reconcile(wait_s=DRAIN_S)["ok"]
    assert worker.stop() == 0
    return worker


def test_a_fresh_worker_restores_every_table_from_its_changelog(pipeline):
    run = pipeline("exactly_once")
    stopped_after_a_load(run, seed=33)

    fresh = run.add_worker()
    wait_for(lambda: is_ready(fresh), timeout=DRAIN_S, what="the fresh worker to be ready")
    assert value(scrape(fresh), RESTORED, table="merchant-totals") > 0
    run.produce(LoadSpec(count=1_000, seed=34))
    assert run.reconcile(wait_s=DRAIN_S)["ok"]


def test_local_state_whose_checkpoint_is_past_its_changelog_is_rebuilt_with_the_reason_logged(pipeline):
    run = pipeline("exactly_once")
    worker = stopped_after_a_load(run, seed=35)
    path = next(Path(worker.env["DATA_DIR"]).glob("**/merchant-totals-0.db"))
    db = Rdict(str(path), Options(raw_mode=True))
    db.put(CHECKPOINT_KEY, b"1000000000")  # as if its changelog had been deleted and created again
    db.close()

    again = run.add_worker(DATA_DIR=worker.env["DATA_DIR"])
    wait_for(lambda: is_ready(again), timeout=DRAIN_S, what="the restarted worker to be ready")

    assert "Rebuilding table merchant-totals partition 0 from its changelog: its checkpoint 1000000000 is past" \
        in again.log_text()
    assert value(scrape(again), RESTORED, table="merchant-totals", partition="0") > 0
    run.produce(LoadSpec(count=1_000, seed=36))
    assert run.reconcile(wait_s=DRAIN_S)["ok"]
