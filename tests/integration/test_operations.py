"""Operating a worker on the real broker: /metrics, /health, /ready and merchant queries."""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.samples import Sample
from worker_metrics import scrape, series, value

from app.kafka import ensure_topics
from app.loadgen import LoadSpec
from tools.workers import Worker, wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
TABLES = ("seen-events", "merchant-totals", "merchant-window-totals", "stream-times")


def get_json(worker: Worker, path: str) -> tuple[int, dict]:
    status, body = worker.get(path)
    return status, json.loads(body)


def test_metrics_are_served_and_move_while_a_load_runs(pipeline):
    run = pipeline("exactly_once")
    worker = run.add_worker()
    wait_for(worker.ready, timeout=DRAIN_S, what="the worker to be ready")
    assert get_json(worker, "/health") == (200, {"status": "alive"})
    input_topic, by_merchant = run.settings.input_topic, run.settings.by_merchant_topic

    with ThreadPoolExecutor(1) as pool:
        producing = pool.submit(run.produce, LoadSpec(count=8_000, seed=21, rate=1_000, duplicate_rate=0.1,
                                                      bad_rate=0.05))
        wait_for(lambda: value(scrape(worker), "faust_eos_transactions_committed_total") > 0,
                 timeout=DRAIN_S, what="a first commit")
        during = scrape(worker)
        wait_for(lambda: value(scrape(worker), "faust_eos_events_in_total", agent="ingest")
                 > value(during, "faust_eos_events_in_total", agent="ingest"),
                 timeout=DRAIN_S, what="events_in to move")
        load = producing.result()
    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"], report["problems"]
    after = scrape(worker)

    assert (value(after, "faust_eos_transactions_committed_total")
            > value(during, "faust_eos_transactions_committed_total"))
    # every input record was processed exactly once: no fault, no repeat
    assert value(after, "faust_eos_events_in_total", agent="ingest", topic=input_topic) == load.produced
    assert value(after, "faust_eos_events_deduplicated_total", agent="ingest") == load.by_kind["duplicate"]
    assert value(after, "faust_eos_events_conflicting_total", agent="ingest") == load.by_kind["conflict"]
    assert value(after, "faust_eos_events_dead_lettered_total", agent="ingest") == report["dead_letters"]
    assert value(after, "faust_eos_events_dead_lettered_total", reason="conflict") == load.by_kind["conflict"]
    assert value(after, "faust_eos_events_in_total", agent="aggregate", topic=by_merchant) == report["counted_events"]
    assert value(after, "faust_eos_events_aggregated_total", agent="aggregate") == report["counted_events"]

    committed = value(after, "faust_eos_transactions_committed_total")
    assert value(after, "faust_eos_transactions_begun_total") >= committed
    assert value(after, "faust_eos_commit_duration_seconds_count") >= committed
    assert value(after, "faust_eos_commit_duration_seconds_bucket", le="+Inf") >= committed

    partitions = {str(p) for p in range(run.settings.partitions)}
    lag = series(after, "faust_eos_consumer_lag_records")
    for topic in (input_topic, by_merchant):
        assert {labels["partition"] for labels in lag if labels["topic"] == topic} == partitions
    lso = series(after, "faust_eos_lso_lag_records")
    for topic in run.settings.output_topics:
        assert {labels["partition"] for labels in lso if labels["topic"] == topic} == partitions
    assert all(s.value >= 0 for s in after if s.name in ("faust_eos_consumer_lag_records", "faust_eos_lso_lag_records"))

    # one worker holds every table partition
    assert value(after, "faust_eos_table_keys", table="merchant-totals") == report["merchants"]
    assert value(after, "faust_eos_table_keys", table="seen-events") == report["counted_events"]
    assert value(after, "faust_eos_partitions_assigned", kind="source") == 2 * run.settings.partitions
    assert value(after, "faust_eos_ready") == 1
    assert run.stop_all() == {"worker-0": 0}


def test_ready_flips_only_once_tables_are_restored(pipeline):
    run = pipeline("exactly_once")
    run.produce(LoadSpec(count=4_000, seed=22))
    first = run.add_worker()
    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"], report["problems"]
    assert first.stop() == 0

    fresh = run.add_worker()  # empty data directory: restores every table from its changelog
    answers: list[tuple[int, dict]] = []

    def ready() -> bool:
        try:
            status, body = fresh.get("/ready", timeout=5)
        except OSError:
            return False
        answers.append((status, json.loads(body)))
        return status == 200

    wait_for(ready, timeout=DRAIN_S, interval=0.2, what="/ready")
    not_ready = [body for status, body in answers if status == 503]
    assert not_ready, f"/ready never answered 503 before 200: {answers}"
    assert all(body["status"] == "not ready" and body["reason"] for body in not_ready)
    assert answers[-1] == (200, {"status": "ready"})

    # ready means restored: every total is already there, nothing left to restore
    samples = scrape(fresh)
    assert value(samples, "faust_eos_changelog_records_restored_total", kind="active") > 0
    assert value(samples, "faust_eos_recovery_remaining_records") == 0
    for merchant, expected in report["expected_totals"].items():
        status, total = get_json(fresh, f"/merchants/{merchant}/")
        assert status == 200 and ((total["count"], total["amount_cents"])
                                  == (expected["count"], expected["amount_cents"]))
    assert run.stop_all() == {"worker-0": 0, "worker-1": 0}


def test_any_worker_answers_for_any_merchant_through_routing(pipeline):
    run = pipeline("exactly_once")
    # Known startup race, not what this test is about: a worker that creates a
    # changelog topic sometimes never sees it in its metadata, and its aggregate
    # agent then crashes on every event (PartitionsMismatch). Create them first.
    ensure_topics(run.settings, [f"{run.settings.app_id}-{table}-changelog" for table in TABLES])
    run.produce(LoadSpec(count=3_000, seed=23, merchants=12))
    first = run.add_worker()
    wait_for(first.ready, timeout=DRAIN_S, what="the first worker to be ready")
    workers = [first, run.add_worker()]
    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"], report["problems"]
    wait_for(lambda: all(w.ready() for w in workers), timeout=DRAIN_S, what="both workers to be ready")

    held = [set(get_json(w, "/merchants/")[1]) for w in workers]  # what each worker holds locally
    assert held[0] and held[1], "the partitions were not spread over both workers"
    assert not held[0] & held[1]
    assert held[0] | held[1] == set(report["expected_totals"])

    for asker, owner in ((0, 1), (1, 0)):
        for merchant in held[owner]:
            expected = report["expected_totals"][merchant]
            status, total = get_json(workers[asker], f"/merchants/{merchant}/")
            assert status == 200, total
            assert (total["count"], total["amount_cents"]) == (expected["count"], expected["amount_cents"])
            status, windows = get_json(workers[asker], f"/merchants/{merchant}/windows/?limit=1000")
            assert status == 200 and windows["merchant_id"] == merchant
            assert sum(w["count"] for w in windows["windows"]) == expected["count"]
            starts = [w["window_start"] for w in windows["windows"]]
            assert starts == sorted(starts, reverse=True)

    for worker in workers:
        for path in ("/merchants/no-such-merchant/", "/merchants/no-such-merchant/windows/"):
            status, body = get_json(worker, path)
            assert status == 404 and "no-such-merchant" in body["error"]
    assert run.stop_all() == {"worker-0": 0, "worker-1": 0}


def takeover(pipeline, standby_replicas: int) -> dict[str, float]:
    """Two workers share the load, one stops: what the other restores for the partitions it takes over."""
    run = pipeline("exactly_once", STANDBY_REPLICAS=str(standby_replicas))
    ensure_topics(run.settings, [f"{run.settings.app_id}-{table}-changelog" for table in TABLES])
    leaving = run.add_worker()
    wait_for(leaving.ready, timeout=DRAIN_S, what="the first worker to be ready")
    staying = run.add_worker()
    wait_for(lambda: leaving.ready() and staying.ready(), timeout=DRAIN_S, what="both workers to be ready")
    run.produce(LoadSpec(count=4_000, seed=24))
    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"], report["problems"]
    if standby_replicas:
        wait_for(lambda: value(scrape(staying), "faust_eos_recovery_remaining_records", kind="standby") == 0,
                 timeout=DRAIN_S, what="the standby replicas to catch up")
    # the leaving worker's input partitions, hence the table partitions that move
    moving = {(labels["topic"], labels["partition"])
              for labels in series(scrape(leaving), "faust_eos_consumer_lag_records")}
    source_of = {"seen-events": run.settings.input_topic}
    moved = {(table, partition) for table in TABLES for topic, partition in moving
             if topic == source_of.get(table, run.settings.by_merchant_topic)}
    assert moved
    before = scrape(staying)

    started = time.monotonic()
    assert leaving.stop() == 0
    sources = 2 * run.settings.partitions
    wait_for(lambda: staying.ready() and value(scrape(staying), "faust_eos_partitions_assigned", kind="source")
             == sources, timeout=DRAIN_S, interval=0.2, what="the takeover")
    took_s = time.monotonic() - started
    after = scrape(staying)

    run.produce(LoadSpec(count=2_000, seed=25))  # the survivor carries on exactly
    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"], report["problems"]

    def restored(samples: list[Sample], kind: str, partitions: set) -> float:
        return sum(s.value for s in samples if s.name == "faust_eos_changelog_records_restored_total"
                   and s.labels["kind"] == kind and (s.labels["table"], s.labels["partition"]) in partitions)

    return {
        "moved_restored_at_takeover": restored(after, "active", moved) - restored(before, "active", moved),
        "moved_held_as_standby": restored(before, "standby", moved),
        "takeover_s": round(took_s, 1),
    }


def test_standby_replica_means_fewer_changelog_records_to_restore_at_takeover(pipeline):
    from_scratch = takeover(pipeline, standby_replicas=0)
    from_standby = takeover(pipeline, standby_replicas=1)

    assert from_scratch["moved_held_as_standby"] == 0
    assert from_scratch["moved_restored_at_takeover"] > 0
    assert from_standby["moved_held_as_standby"] > 0
    # the standby already holds the moved partitions: at most the records written since it caught up
    assert from_standby["moved_restored_at_takeover"] < from_scratch["moved_restored_at_takeover"] / 10
