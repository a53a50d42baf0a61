"""Bounded state on the real broker: dedup entries and windows past their time are deleted, late events dead-lettered.

A run several times longer than a short dedup retention, with short windows,
keeps its table keys near what the retention and the open windows hold, where
without the sweeps they would grow with every event. Lateness is decided in
stream time (the largest event time seen on a ``payments-by-merchant``
partition), and reconcile replays the same rule.
"""
from __future__ import annotations

import json
import threading

import pytest
from confluent_kafka import Producer
from worker_metrics import scrape, value

from app.loadgen import LoadSpec
from app.reconcile import read_committed
from tools.workers import wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
RETENTION_S = 10
KEYS = "faust_eos_table_keys"


def test_a_run_six_retentions_long_keeps_dedup_entries_and_windows_bounded(pipeline):
    run = pipeline("exactly_once", DEDUP_RETENTION_DAYS=str(RETENTION_S / 86_400), WINDOW_SECONDS="2")
    worker = run.add_worker()
    wait_for(worker.ready, timeout=DRAIN_S, what="the worker to be ready")
    # no repeats: after the short retention the pipeline counts a repeat again, which reconcile does not model
    load = LoadSpec(count=9_000, rate=150, seed=41, duplicate_rate=0, bad_rate=0)
    largest: list[float] = []
    producing = threading.Thread(target=run.produce, args=(load,))
    producing.start()
    while producing.is_alive():
        largest.append(value(scrape(worker), KEYS, table="seen-events"))
        producing.join(timeout=2)

    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"], report["problems"]
    windows = {(w["merchant_id"], w["window_start"]) for w in map(json.loads, (
        r.value for r in read_committed(run.settings, run.settings.windows_topic)))}
    samples = scrape(worker)
    # without the sweeps every counted event and every window ever written would still be a key
    assert value(samples, KEYS, table="seen-events") < report["counted_events"] / 2
    assert value(samples, KEYS, table="merchant-window-totals") < len(windows) / 2
    # flat, not growing: the second half of the run holds no more keys than about the first half's peak
    half = len(largest) // 2
    assert max(largest[half:]) < 1.5 * max(largest[:half])
    for table in ("seen-events", "merchant-window-totals"):
        assert value(samples, "faust_eos_table_entries_swept_total", table=table) > 0
    # the deletes reached the changelog too: a worker without local state restores only what is left
    assert worker.stop() == 0
    fresh = run.add_worker()
    wait_for(fresh.ready, timeout=DRAIN_S, what="a fresh worker to be ready")
    assert value(scrape(fresh), KEYS, table="seen-events") < report["counted_events"] / 2


def send_payments(settings, events: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "enable.idempotence": True})
    for event in events:
        producer.produce(settings.input_topic, key=event["customer_id"].encode(), value=json.dumps(event).encode())
    assert producer.flush(30) == 0


def test_an_event_for_a_window_closed_in_stream_time_is_dead_lettered_as_late_and_still_counted(pipeline):
    run = pipeline("exactly_once", WINDOW_SECONDS="60", WINDOW_GRACE_SECONDS="6")
    base = {"merchant_id": "m001", "customer_id": "c1", "amount_cents": 100}
    send_payments(run.settings, [
        {**base, "event_id": "e-1", "ts": 1000.0},
        {**base, "event_id": "e-2", "ts": 1200.0},  # stream time 1200 closes [960, 1020) (at 1026)
        {**base, "event_id": "e-3", "ts": 1010.0},  # late
        {**base, "event_id": "e-4", "ts": 1190.0},  # [1140, 1200) closes only at 1206: on time
    ])
    run.add_worker()
    report = run.reconcile(wait_s=DRAIN_S)
    assert report["ok"], report["problems"]
    assert report["late_events"] == 1 and report["counted_events"] == 4
    assert report["final_totals"]["m001"] == {"count": 4, "amount_cents": 400}
    [late] = read_committed(run.settings, run.settings.dlq_topic)
    assert late.headers["dlq.reason"] == b"late"
    assert late.headers["dlq.source.topic"] == run.settings.by_merchant_topic.encode()
    assert json.loads(late.value)["event_id"] == "e-3"
