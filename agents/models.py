"""The records that flow through the pipeline (``faust.Record`` models)."""
from __future__ import annotations

import faust


class Payment(faust.Record, serializer="json"):
    """A valid payment event, as read from ``payments``."""

    event_id: str
    merchant_id: str
    customer_id: str
    amount_cents: int
    ts: float

    def fingerprint(self) -> str:
        """What must match for a repeated ``event_id`` to count as a duplicate."""
        return f"{self.merchant_id}|{self.customer_id}|{self.amount_cents}|{self.ts!r}"


class SeenEvent(faust.Record, serializer="json"):
    """What the dedup table remembers of a counted event_id."""

    fingerprint: str
    first_seen: float


class MerchantTotal(faust.Record, serializer="json"):
    """One update of a merchant's running total, caused by ``event_id``."""

    merchant_id: str
    count: int
    amount_cents: int
    event_id: str


class WindowTotal(faust.Record, serializer="json"):
    """One update of a merchant's total inside a tumbling window."""

    merchant_id: str
    window_start: float
    window_end: float
    count: int
    amount_cents: int
    event_id: str
