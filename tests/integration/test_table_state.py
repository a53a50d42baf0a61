"""Table state on the real broker: a restart restores only what its checkpoint lacks, and bad local state is rebuilt.

Tables hold only committed state, with the changelog offset it reflects, so a
worker that stops (cleanly or by SIGKILL) and starts again on its data
directory restores only the changelog records past that offset.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from rocksdict import Options, Rdict
from worker_metrics import scrape, value

from app.kafka import producer_config
from app.loadgen import LoadSpec
from faust_eos.state.store import CHECKPOINT_KEY, OWN_KEYS
from tools.workers import wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
RESTORED = "faust_eos_changelog_records_restored_total"


def restart(run, worker, how: str):
    """Stop ``worker`` as told and start a new one on its data directory, once it is ready."""
    if how == "stop":
        assert worker.stop() == 0
    else:
        worker.kill()
    again = run.add_worker(DATA_DIR=worker.env["DATA_DIR"])
    wait_for(again.ready, timeout=DRAIN_S, what="the restarted worker to be ready")
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
    wait_for(fresh.ready, timeout=DRAIN_S, what="the fresh worker to be ready")
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
    wait_for(again.ready, timeout=DRAIN_S, what="the restarted worker to be ready")

    assert "Rebuilding table merchant-totals partition 0 from its changelog: its checkpoint 1000000000 is past" \
        in again.log_text()
    assert value(scrape(again), RESTORED, table="merchant-totals", partition="0") > 0
    run.produce(LoadSpec(count=1_000, seed=36))
    assert run.reconcile(wait_s=DRAIN_S)["ok"]


def test_a_checkpoint_past_a_commit_whose_markers_are_still_missing_is_trusted_once_they_come(pipeline):
    # The broker answers a commit before it writes the commit markers, and after a broker
    # restart they can come late. Here another producer's transaction stands for such a
    # commit: it rewrites a key with the value the table already holds, and the local
    # checkpoint is set to that record, as a worker's commit would have set it.
    run = pipeline("exactly_once")
    worker = stopped_after_a_load(run, seed=37)
    path = next(Path(worker.env["DATA_DIR"]).glob("**/merchant-totals-0.db"))
    db = Rdict(str(path), Options(raw_mode=True))
    key, table_value = next((k, v) for k, v in db.items() if k not in OWN_KEYS)
    late = Producer(producer_config(run.settings, **{
        "transactional.id": f"{run.name}-late-commit",
        "transaction.timeout.ms": 600_000,  # open across the worker's start, however slow
    }))
    late.init_transactions(30)
    late.begin_transaction()
    offsets: list[int] = []
    changelog = f"{run.settings.app_id}-merchant-totals-changelog"
    late.produce(changelog, key=key, value=table_value, partition=0,
                 on_delivery=lambda err, msg: offsets.append(msg.offset()))
    late.flush(30)
    db.put(CHECKPOINT_KEY, str(offsets[0]).encode())
    db.close()

    # it waits half the session timeout at most: long enough for this test to see it wait and commit
    again = run.add_worker(DATA_DIR=worker.env["DATA_DIR"], SESSION_TIMEOUT_S="60")
    wait_for(lambda: f"Waiting for pending transactions on {changelog}[0] to settle" in again.log_text(),
             timeout=DRAIN_S, what="the worker to wait for the pending transaction")
    late.commit_transaction(30)
    wait_for(again.ready, timeout=DRAIN_S, what="the restarted worker to be ready")

    assert "Rebuilding table merchant-totals" not in again.log_text()
    assert value(scrape(again), RESTORED, table="merchant-totals", partition="0") == 0
    run.produce(LoadSpec(count=1_000, seed=38))
    assert run.reconcile(wait_s=DRAIN_S)["ok"]
