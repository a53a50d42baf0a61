"""A consumer group that lost its committed offsets stops the worker, instead of processing every event again.

The group's offsets go as a broker's offset retention or an operator would take
them: the group is deleted while no worker runs. Its tables' changelogs still
hold what the lost offsets committed with.
"""
from __future__ import annotations

import pytest

from app.kafka import admin
from app.loadgen import LoadSpec
from tools.workers import wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # generous: the machine is shared; this bounds a hang, it is not a timing check


def test_a_group_whose_offsets_were_deleted_stops_the_worker_and_nothing_is_counted_twice(kafka, pipeline):
    run = pipeline("exactly_once")
    load = run.produce(LoadSpec(count=2_000, seed=21))
    run.add_worker()
    counted = run.reconcile(wait_s=DRAIN_S)
    assert counted["ok"], counted["problems"]
    assert counted["counted_events"] == load.by_kind["valid"]
    assert run.stop_all() == {"worker-0": 0}

    client = admin(kafka)  # kept: the futures never resolve once their client is gone
    for deleted in client.delete_consumer_groups([run.settings.app_id]).values():
        deleted.result(30)
    worker = run.add_worker()
    wait_for(lambda: not worker.alive(), timeout=DRAIN_S, what="the worker to stop")

    assert worker.exit_code() != 0
    assert f"consumer group '{run.settings.app_id}' holds no committed offset for" in worker.log_text()
    after = run.reconcile()
    assert after["ok"], after["problems"]
    assert after["total_updates"] == counted["total_updates"]
