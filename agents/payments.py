"""The payment aggregation pipeline, as two Faust agents.

``ingest``: payments (keyed by customer) -> validate -> drop repeats of an
event_id -> re-key by merchant. Bad records and conflicting repeats go to the
dead-letter topic with their original bytes.

``aggregate``: payments by merchant -> running total and tumbling-window total
per merchant -> one output record per update.
"""
from __future__ import annotations

import time

import faust

from agents import topics
from agents.logic import (
    Verdict,
    add_to_total,
    add_to_window,
    dedup_verdict,
    seen_entry,
    window_key,
    window_start,
)
from agents.models import Payment
from agents.validation import Reason, Rejection, parse_payment
from app import app, metrics
from config import settings
from tables import merchant_totals, seen_events, window_totals

RETENTION_S = settings.dedup_retention_days * 86_400
ingest_metrics = metrics.AgentMetrics("ingest", settings.input_topic)
aggregate_metrics = metrics.AgentMetrics("aggregate", settings.by_merchant_topic)


async def dead_letter(event: faust.EventT, rejection: Rejection) -> None:
    """Send the record behind ``event`` to the dead-letter topic, untouched."""
    message = event.message
    ingest_metrics.dead_lettered(rejection.reason.value)
    await topics.dead_letters.send(
        key=message.key,
        value=message.value,
        headers={
            "dlq.reason": rejection.reason.value.encode(),
            "dlq.detail": rejection.detail.encode(),
            "dlq.source.topic": message.topic.encode(),
            "dlq.source.partition": str(message.partition).encode(),
            "dlq.source.offset": str(message.offset).encode(),
        },
    )


@app.agent(topics.payments)
async def ingest(stream: faust.StreamT) -> None:
    async for event in stream.events():
        ingest_metrics.events_in.inc()
        result = parse_payment(event.message.value, max_bytes=settings.max_event_bytes,
                               max_amount_cents=settings.max_amount_cents)
        if isinstance(result, Rejection):
            await dead_letter(event, result)
            continue
        now = time.time()
        verdict = dedup_verdict(seen_events.get(result.event_id), result, now, RETENTION_S)
        if verdict is Verdict.DUPLICATE:
            ingest_metrics.deduplicated.inc()
        elif verdict is Verdict.CONFLICT:
            ingest_metrics.conflicting.inc()
            await dead_letter(event, Rejection(Reason.CONFLICT, f"event_id {result.event_id} seen with other content"))
        elif verdict is Verdict.NEW:
            seen_events[result.event_id] = seen_entry(result, now)
            await topics.payments_by_merchant.send(key=result.merchant_id, value=result)


@app.agent(topics.payments_by_merchant)
async def aggregate(stream: faust.StreamT[Payment]) -> None:
    async for payment in stream:
        aggregate_metrics.events_in.inc()
        total = add_to_total(merchant_totals.get(payment.merchant_id), payment)
        merchant_totals[payment.merchant_id] = total
        await topics.merchant_totals.send(key=payment.merchant_id, value=total)

        key = window_key(payment.merchant_id, window_start(payment.ts, settings.window_seconds))
        window = add_to_window(window_totals.get(key), payment, settings.window_seconds)
        window_totals[key] = window
        await topics.window_totals.send(key=payment.merchant_id, value=window)
        aggregate_metrics.aggregated.inc()
