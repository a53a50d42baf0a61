"""The pipeline's decisions as pure functions: dedup verdicts, aggregation and event time.

No Kafka, no Faust state: the agents call these, the unit tests test them, and
``reconcile`` uses them to recompute what the outputs must be.
"""
from __future__ import annotations

import math
from enum import Enum
from typing import Optional

from agents.models import MerchantTotal, Payment, SeenEvent, WindowTotal
from faust_eos import new_record


class Verdict(str, Enum):
    NEW = "new"  # first time this event_id is seen: count it
    DUPLICATE = "duplicate"  # same event_id, same content: an upstream retry, drop it
    CONFLICT = "conflict"  # same event_id, different content: report it


def seen_entry(payment: Payment, now: float) -> SeenEvent:
    """What the dedup table remembers of a counted event."""
    return new_record(SeenEvent, fingerprint=payment.fingerprint(), first_seen=now)


def dedup_expires_at(seen: SeenEvent, retention_s: float) -> float:
    """The end of a dedup entry's retention, by the clock it was first seen on."""
    return seen.first_seen + retention_s


def dedup_expired(seen: SeenEvent, now: float, retention_s: float) -> bool:
    """Whether a dedup entry is past its retention: it no longer makes a repeat a duplicate."""
    return now > dedup_expires_at(seen, retention_s)


def dedup_verdict(seen: Optional[SeenEvent], payment: Payment, now: float, retention_s: float) -> Verdict:
    """Classify ``payment`` against what the dedup table holds for its event_id."""
    if seen is None or dedup_expired(seen, now, retention_s):
        return Verdict.NEW
    if seen.fingerprint == payment.fingerprint():
        return Verdict.DUPLICATE
    return Verdict.CONFLICT


def add_to_total(total: Optional[MerchantTotal], payment: Payment) -> MerchantTotal:
    """The merchant's running total after ``payment``."""
    count, amount = (total.count, total.amount_cents) if total else (0, 0)
    return new_record(
        MerchantTotal,
        merchant_id=payment.merchant_id,
        count=count + 1,
        amount_cents=amount + payment.amount_cents,
        event_id=payment.event_id,
    )


def window_start(ts: float, size_s: int) -> float:
    """Start of the tumbling window of ``size_s`` seconds that holds ``ts``."""
    return math.floor(ts / size_s) * size_s


def window_key(merchant_id: str, start: float) -> str:
    return f"{merchant_id}@{start:.0f}"


def add_to_window(window: Optional[WindowTotal], payment: Payment, size_s: int) -> WindowTotal:
    """The merchant's window total after ``payment``."""
    start = window_start(payment.ts, size_s)
    count, amount = (window.count, window.amount_cents) if window else (0, 0)
    return new_record(
        WindowTotal,
        merchant_id=payment.merchant_id,
        window_start=start,
        window_end=start + size_s,
        count=count + 1,
        amount_cents=amount + payment.amount_cents,
        event_id=payment.event_id,
    )


def advance_stream_time(stream_time: Optional[float], ts: float) -> float:
    """A partition's stream time after an event of time ``ts``: the largest event time seen on it."""
    return ts if stream_time is None else max(stream_time, ts)


def window_closes_at(window_end: float, grace_s: float) -> float:
    """The stream time at which a window closes: its end plus the grace period."""
    return window_end + grace_s


def window_closed(window_end: float, stream_time: Optional[float], grace_s: float) -> bool:
    """Whether a window has closed: stream time reached its end plus the grace period."""
    return stream_time is not None and stream_time >= window_closes_at(window_end, grace_s)


def is_late(ts: float, stream_time: Optional[float], size_s: int, grace_s: float) -> bool:
    """Whether an event of time ``ts`` arrives after its window closed."""
    return window_closed(window_start(ts, size_s) + size_s, stream_time, grace_s)
