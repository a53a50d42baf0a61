"""The pipeline's two hops written as ordinary Faust, the benchmarks' reference lines.

Written as a Faust user would write it, with Faust's own topics and tables, per-event
agents and ``faust.Record`` models: ``ingest`` parses each payment, drops repeats of an
event_id and re-keys the rest by merchant; ``aggregate`` keeps each merchant's running
total and sends every update to ``merchant-totals``. It has no windows and no dead
letters (a bad or conflicting record is dropped), so it does less work per event than
the pipeline. Two apps are built from it, differing only in their broker and store URLs:

* :mod:`benchmarks.stock_faust`: stock Faust (``kafka://``, ``rocksdb://``), at_least_once;
* :mod:`benchmarks.ordinary_eos`: the same app on faust-eos (``eos://``, ``eos-rocksdb://``),
  under the run's ``PROCESSING_GUARANTEE``.

Settings come from :mod:`config`, as for the pipeline's workers.
"""
from __future__ import annotations

import time

import faust

from agents.models import MerchantTotal, Payment, SeenEvent
from agents.validation import Rejection, parse_payment
from config import settings


def two_hop_app(app_id: str, *, broker: str, store: str, guarantee: str) -> faust.App:
    """The two-hop app on ``broker`` (a URL) and ``store``, under ``guarantee``."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        app_id,
        broker=broker,
        processing_guarantee=guarantee,
        broker_commit_interval=settings.commit_interval_ms / 1000,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(settings.session_timeout_s / 10, 0.5),
        store=store,
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
            payment = parse_payment(raw, max_bytes=settings.max_event_bytes,
                                    max_amount_cents=settings.max_amount_cents)
            if isinstance(payment, Rejection):
                continue
            if payment.event_id not in seen_events:  # a repeat, or a conflict: dropped
                seen_events[payment.event_id] = SeenEvent(fingerprint=payment.fingerprint(), first_seen=time.time())
                await payments_by_merchant.send(key=payment.merchant_id, value=payment)

    @app.agent(payments_by_merchant)
    async def aggregate(stream: faust.StreamT[Payment]) -> None:
        async for payment in stream:
            before = merchant_totals.get(payment.merchant_id)
            total = MerchantTotal(merchant_id=payment.merchant_id, count=(before.count if before else 0) + 1,
                                  amount_cents=(before.amount_cents if before else 0) + payment.amount_cents,
                                  event_id=payment.event_id)
            merchant_totals[payment.merchant_id] = total
            await merchant_totals_topic.send(key=payment.merchant_id, value=total)

    return app
