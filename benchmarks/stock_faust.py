"""Stock Faust on the pipeline's two hops, the benchmarks' reference line: ``faust -A benchmarks.stock_faust worker``.

Written as a Faust user would write it, on Faust's own transport
(``kafka://``), store (``rocksdb://``), topics and tables, under
at_least_once, with the pipeline's models and decisions: ``ingest`` parses each
payment, drops repeats of an event_id and re-keys the rest by merchant;
``aggregate`` keeps each merchant's running total and sends every update to
``merchant-totals``. It has no windows and no dead letters (a bad or
conflicting record is dropped), so it does less work per event than the
pipeline. Settings come from :mod:`config`, as for the pipeline's workers.
"""
from __future__ import annotations

import time

import faust

from agents.logic import Verdict, add_to_total, dedup_verdict, seen_entry
from agents.models import MerchantTotal, Payment, SeenEvent
from agents.validation import Rejection, parse_payment
from config import settings

settings.data_dir.mkdir(parents=True, exist_ok=True)
app = faust.App(
    f"{settings.app_id}-stock",
    broker=f"kafka://{settings.bootstrap_servers}",
    processing_guarantee="at_least_once",
    broker_commit_interval=settings.commit_interval_ms / 1000,
    store="rocksdb://",
    datadir=str(settings.data_dir),
    topic_partitions=settings.partitions,
    topic_replication_factor=settings.replication_factor,
    topic_disable_leader=True,
    web_port=settings.web_port,
    web_bind=settings.web_bind,
    web_host=settings.web_host,
)
payments = app.topic(settings.input_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                     value_serializer="raw")
payments_by_merchant = app.topic(settings.by_merchant_topic, key_type=str, value_type=Payment)
merchant_totals_topic = app.topic(settings.totals_topic, key_type=str, value_type=MerchantTotal)
seen_events = app.Table("seen-events", key_type=str, value_type=SeenEvent)
merchant_totals = app.Table("merchant-totals", key_type=str, value_type=MerchantTotal)


@app.agent(payments)
async def ingest(stream: faust.StreamT[bytes]) -> None:
    async for raw in stream:
        payment = parse_payment(raw, max_bytes=settings.max_event_bytes, max_amount_cents=settings.max_amount_cents)
        if isinstance(payment, Rejection):
            continue
        now = time.time()
        if dedup_verdict(seen_events.get(payment.event_id), payment, now, float("inf")) is Verdict.NEW:
            seen_events[payment.event_id] = seen_entry(payment, now)
            await payments_by_merchant.send(key=payment.merchant_id, value=payment)


@app.agent(payments_by_merchant)
async def aggregate(stream: faust.StreamT[Payment]) -> None:
    async for payment in stream:
        total = add_to_total(merchant_totals.get(payment.merchant_id), payment)
        merchant_totals[payment.merchant_id] = total
        await merchant_totals_topic.send(key=payment.merchant_id, value=total)
