"""reconcile --follow beside a running pipeline: its watermark reaches the input's end with nothing to report,
a forged output record is reported in the first round that can see it, and a restart resumes from the saved state.

(Under the fault matrix it runs beside every fault run: tools/faults.py, tests/faults.)
"""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from worker_metrics import scrape, value

from app.loadgen import LoadSpec
from tools.workers import wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
CHECK_S = 2.0


def follower_says(follower, name: str, **labels: str) -> float:
    return value(scrape(follower), name, **labels)


def caught_up(follower, counted: int) -> bool:
    try:
        samples = scrape(follower)
    except (OSError, AssertionError):  # not serving yet
        return False
    return (value(samples, "faust_eos_reconciler_checked_events_total") == counted
            and value(samples, "faust_eos_reconciler_lag_records") == 0
            and value(samples, "faust_eos_reconciler_waiting_events") == 0)


def test_a_forged_update_is_reported_as_extra_in_the_first_round_after_it_and_a_restart_resumes(pipeline):
    run = pipeline("exactly_once")
    run.add_worker()
    follower = run.start_follower(check_s=CHECK_S)
    run.produce(LoadSpec(count=1_500, seed=71, duplicate_rate=0.05, bad_rate=0.02))
    report = run.reconcile(DRAIN_S)
    assert report["ok"], report["problems"]
    wait_for(lambda: caught_up(follower, report["counted_events"]), timeout=DRAIN_S,
             what="the follower's watermark to reach the input's end")
    assert {kind: follower_says(follower, "faust_eos_reconciler_differences_total", kind=kind)
            for kind in ("missing", "extra", "mismatched")} == {"missing": 0, "extra": 0, "mismatched": 0}

    # a record no event caused, written to merchant-totals behind the pipeline's back
    producer = Producer(run.settings.kafka_client())
    producer.produce(run.settings.totals_topic, key=b"m001", value=json.dumps(
        {"merchant_id": "m001", "count": 1_000, "amount_cents": 1, "event_id": "forged-1"}).encode())
    rounds_before = follower_says(follower, "faust_eos_reconciler_rounds_total")
    assert producer.flush(30) == 0
    rounds_after = follower_says(follower, "faust_eos_reconciler_rounds_total")

    differences = run.run_dir / "differences.jsonl"
    wait_for(lambda: differences.exists() and differences.read_text().strip(), timeout=DRAIN_S,
             what="the forged update to be reported")
    [reported] = [json.loads(line) for line in differences.read_text().splitlines()]
    assert follower_says(follower, "faust_eos_reconciler_differences_total", kind="extra") == 1
    assert (reported["kind"], reported["event_id"], reported["merchant_id"]) == ("extra", "forged-1", "m001")
    # the round under way when the record was written may not have seen it; the next one must
    assert reported["round"] <= rounds_after + 2, (reported, rounds_before, rounds_after)
    assert "difference: extra event forged-1 (merchant m001)" in follower.log_text()

    # a restart, even after a SIGKILL, resumes from the saved state: nothing reported again, the counts kept
    follower.kill()
    follower = run.start_follower(check_s=CHECK_S)
    wait_for(lambda: caught_up(follower, report["counted_events"])
             and follower_says(follower, "faust_eos_reconciler_rounds_total") > rounds_after + 2,
             timeout=DRAIN_S, what="the restarted follower to catch up")
    assert follower_says(follower, "faust_eos_reconciler_differences_total", kind="extra") == 1
    assert f"resuming from {run.follow_state}" in follower.log_text()
    assert len(differences.read_text().splitlines()) == 1
