"""The pipeline's state: changelog-backed tables on RocksDB.

Every table is partitioned like the stream that updates it (a write goes to
the changelog partition of the event being processed), so each worker holds
the state of exactly the partitions it consumes.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from agents.models import MerchantTotal, SeenEvent, WindowTotal
from app import app, metrics
from config import settings

DAY_MS = 86_400_000

#: changelog settings of tables whose old entries may go: compacted, and
#: records older than the dedup retention deleted
EXPIRING_CHANGELOG = {
    "cleanup.policy": "compact,delete",
    "retention.ms": str(int(settings.dedup_retention_days * DAY_MS)),
}


def counting_restores(name: str) -> Callable[[Any], Awaitable[None]]:
    """The table's ``on_changelog_event`` callback: counts restored records for the metrics."""
    return metrics.count_restores(name, lambda tp: tp in app.tables.recovery.standby_tps)


#: event_id -> SeenEvent, for dropping repeats; keyed like ``payments``.
seen_events = app.Table(
    "seen-events",
    on_changelog_event=counting_restores("seen-events"),
    default=None,
    value_type=SeenEvent,
    partitions=settings.partitions,
    help="event_ids already counted, with their fingerprint and first-seen time",
    extra_topic_configs=EXPIRING_CHANGELOG,
)

#: merchant_id -> MerchantTotal, the running total; keyed like ``payments-by-merchant``.
merchant_totals = app.Table(
    "merchant-totals",
    on_changelog_event=counting_restores("merchant-totals"),
    default=None,
    value_type=MerchantTotal,
    partitions=settings.partitions,
    help="running count and amount per merchant",
)

#: "merchant_id@window_start" -> WindowTotal, per tumbling window.
window_totals = app.Table(
    "merchant-window-totals",
    on_changelog_event=counting_restores("merchant-window-totals"),
    default=None,
    value_type=WindowTotal,
    partitions=settings.partitions,
    help=f"count and amount per merchant per {settings.window_seconds} s window",
    extra_topic_configs=EXPIRING_CHANGELOG,
)
