"""The payment aggregation pipeline, as two Faust agents, each handed whole fetched batches.

``ingest``: payments (keyed by customer) -> validate -> drop repeats of an
event_id -> re-key by merchant. Bad records and conflicting repeats go to the
dead-letter topic with their original bytes.

``aggregate``: payments by merchant -> running total and tumbling-window total
per merchant -> one output record per update. Windows live in event time: a
partition's stream time is the largest event time seen on it, a window closes
once stream time passes its end plus the grace period, and an event for a
closed window still counts in its merchant's running total but goes to the
dead-letter topic (reason ``late``) instead of its window.
"""
from __future__ import annotations

import time
from typing import Any

import faust

from agents import topics
from agents.logic import (
    Verdict,
    add_to_total,
    add_to_window,
    advance_stream_time,
    dedup_verdict,
    is_late,
    seen_entry,
    window_key,
    window_start,
)
from agents.models import Payment
from agents.validation import Reason, Rejection, parse_payment
from app import app, metrics
from config import settings
from faust_eos import Batch, BatchRecord
from tables import (
    DEDUP_RETENTION_S,
    close_windows,
    expire_seen_events,
    merchant_totals,
    seen_events,
    stream_times,
    window_totals,
)

ingest_metrics = metrics.AgentMetrics("ingest", settings.input_topic,
                                     [reason.value for reason in Reason if reason is not Reason.LATE])
aggregate_metrics = metrics.AgentMetrics("aggregate", settings.by_merchant_topic, [Reason.LATE.value])


async def dead_letter(record: BatchRecord, rejection: Rejection, counted_by: metrics.AgentMetrics) -> None:
    """Send ``record`` to the dead-letter topic with its original key and bytes."""
    counted_by.dead_lettered(rejection.reason.value)
    await topics.dead_letters.send(
        key=record.raw_key,
        value=record.raw_value,
        headers={
            "dlq.reason": rejection.reason.value.encode(),
            "dlq.detail": rejection.detail.encode(),
            "dlq.source.topic": record.topic.encode(),
            "dlq.source.partition": str(record.partition).encode(),
            "dlq.source.offset": str(record.offset).encode(),
        },
    )


@app.agent(topics.payments)
async def ingest(batches: faust.StreamT[Batch]) -> None:
    async for batch in batches:
        ingest_metrics.events_in.inc(len(batch))
        for record in batch:
            await ingest_one(record)


async def ingest_one(record: BatchRecord) -> None:
    """Validate one payment, drop it if seen, dead-letter it if bad or conflicting, else re-key it."""
    now = time.time()
    expire_seen_events(now)
    result = parse_payment(record.raw_value, max_bytes=settings.max_event_bytes,
                           max_amount_cents=settings.max_amount_cents)
    if isinstance(result, Rejection):
        await dead_letter(record, result, ingest_metrics)
        return
    verdict = dedup_verdict(seen_events.get(result.event_id), result, now, DEDUP_RETENTION_S)
    if verdict is Verdict.DUPLICATE:
        ingest_metrics.deduplicated.inc()
    elif verdict is Verdict.CONFLICT:
        ingest_metrics.conflicting.inc()
        await dead_letter(record, Rejection(Reason.CONFLICT, f"event_id {result.event_id} seen with other content"),
                          ingest_metrics)
    elif verdict is Verdict.NEW:
        seen_events[result.event_id] = seen_entry(result, now)
        await topics.payments_by_merchant.send(key=result.merchant_id, value=result)


class BatchTable:
    """A table as one batch uses it: each key read from the table once, and written to it once, by
    :meth:`write_back` at the batch's end.

    A batch is one event, so the table ends up where each record's own writes would have left it,
    also when a sweep deleted an entry of the table in the middle of the batch (:meth:`write_back`).
    """

    def __init__(self, table: Any) -> None:
        self.table = table
        self._values: dict[Any, Any] = {}
        self._written: set[Any] = set()
        self._found: set[Any] = set()  # keys the table held when the batch first read them

    def get(self, key: Any) -> Any:
        try:
            return self._values[key]
        except KeyError:
            value = self._values[key] = self.table.get(key)
            if value is not None:
                self._found.add(key)
            return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self._values[key] = value
        self._written.add(key)

    def write_back(self, swept: bool = False) -> None:
        """Write each written key's last value to the table. ``swept``: a sweep deleted entries of the table
        during the batch; a key it took stays deleted (its entry had expired, and writing it would bring it back
        until the sweep passes again)."""
        for key in self._written:
            if swept and key in self._found and key not in self.table:
                continue
            self.table[key] = self._values[key]


@app.agent(topics.payments_by_merchant)
async def aggregate(batches: faust.StreamT[Batch]) -> None:
    async for batch in batches:
        aggregate_metrics.events_in.inc(len(batch))
        # Each table key is read once per batch and written once, at its end (also when a record fails);
        # the records aggregated are counted once per batch too.
        partition = str(batch.partition)
        stream_time = seen_until = stream_times.get(partition)
        totals, windows = BatchTable(merchant_totals), BatchTable(window_totals)
        aggregated, swept = 0, False
        try:
            for record in batch:
                stream_time = advance_stream_time(stream_time, record.value.ts)
                swept = close_windows(stream_time) > 0 or swept
                await aggregate_one(record, stream_time, totals, windows)
                aggregated += 1
        finally:
            aggregate_metrics.aggregated.inc(aggregated)
            totals.write_back()
            windows.write_back(swept)
            if stream_time != seen_until:
                stream_times[partition] = stream_time


async def aggregate_one(record: BatchRecord, stream_time: float, totals: BatchTable, windows: BatchTable) -> None:
    """Count one payment in its merchant's running total and, unless late at ``stream_time`` (its partition's,
    this payment included), in its window."""
    payment: Payment = record.value
    size, grace = settings.window_seconds, settings.window_grace_seconds
    total = add_to_total(totals.get(payment.merchant_id), payment)
    totals[payment.merchant_id] = total
    await topics.merchant_totals.send(key=payment.merchant_id, value=total)

    start = window_start(payment.ts, size)
    if is_late(payment.ts, stream_time, size, grace):
        await dead_letter(record, Rejection(
            Reason.LATE, f"window {start:.0f}-{start + size:.0f} closed at stream time {stream_time:.3f} "
                         f"(grace {grace:g} s); counted in the merchant total only"), aggregate_metrics)
    else:
        key = window_key(payment.merchant_id, start)
        window = add_to_window(windows.get(key), payment, size)
        windows[key] = window
        await topics.window_totals.send(key=payment.merchant_id, value=window)
