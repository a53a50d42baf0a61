"""The pipeline's state: changelog-backed tables on RocksDB.

Every table is partitioned like the stream that updates it (a write goes to
the changelog partition of the event being processed), so each worker holds
the state of exactly the partitions it consumes.

State stays bounded: the sweeps delete dedup entries past their retention and
windows past their grace period, inside the events of their partitions (so the
tombstones commit with them; :mod:`faust_eos.state.sweep`). The changelogs are only
compacted, as Faust makes them: no time retention deletes records a restore
may still be reading up to.
"""
from __future__ import annotations

from typing import Any

from agents.logic import dedup_expires_at, window_closes_at
from agents.models import MerchantTotal, SeenEvent, WindowTotal
from app import app
from config import settings
from faust_eos import Sweep

DAY_MS = 86_400_000
DEDUP_RETENTION_S = settings.dedup_retention_days * DAY_MS / 1000


def partitioned_table(name: str, value_type: Any, help: str) -> Any:
    """A table partitioned like the stream that updates it, on RocksDB with the configured write buffer."""
    return app.Table(name, default=None, value_type=value_type, partitions=settings.partitions, help=help,
                      options={"write_buffer_size": int(settings.table_write_buffer_mb * 2**20)})


#: event_id -> SeenEvent, for dropping repeats; keyed like ``payments``.
seen_events = partitioned_table(
    "seen-events", SeenEvent, "event_ids already counted, with their fingerprint and first-seen time")

#: merchant_id -> MerchantTotal, the running total; keyed like ``payments-by-merchant``.
merchant_totals = partitioned_table("merchant-totals", MerchantTotal, "running count and amount per merchant")

#: "merchant_id@window_start" -> WindowTotal, per tumbling window.
window_totals = partitioned_table(
    "merchant-window-totals", WindowTotal, f"count and amount per merchant per {settings.window_seconds} s window")

#: str(partition) -> the largest event time seen on that partition of ``payments-by-merchant``;
#: it decides when windows close, and it commits with the events that moved it
stream_times = partitioned_table(
    "stream-times", float, "stream time (largest event time seen) per partition of payments-by-merchant")


#: called once per ``ingest`` event, with the time it runs at: deletes dedup entries past their retention. An
#: entry is written with the time it was first seen, so it lives the whole retention: the sweep rests while
#: nothing in a partition can have expired (a table younger than the retention: one pass, then none)
expire_seen_events = Sweep(seen_events, lambda seen: dedup_expires_at(seen, DEDUP_RETENTION_S),
                           lifetime=DEDUP_RETENTION_S)
#: called once per ``aggregate`` event, with its partition's stream time: deletes windows that have closed
close_windows = Sweep(window_totals, lambda window: window_closes_at(window.window_end, settings.window_grace_seconds))
