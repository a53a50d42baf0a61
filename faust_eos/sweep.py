"""Deleting a table's expired entries, a few at a time, inside the events that write the table.

A table that lives for months must shed what it no longer needs (dedup entries
past their retention, windows past their grace), or its local state and its
changelog grow for ever. A :class:`Sweep` does it inside the events of each
table partition: its deletes are the table's own, so each tombstone is staged
with the event being processed and commits in the same transaction as the
state that made the entry expire, never before it. Expiry must be for good (once
an entry is expired, the partition's later state keeps it so: a retention on a
clock that moves forward, a window closed by a stream time that never goes
back); then a replay after a crash, which may sweep at other events, never
misses an entry its own state still needs.

Only committed entries are looked at (keys written since the last commit are
fresh by definition), through a cursor that moves on with each sweep and wraps
at the end, so a sweep costs the same whatever the table's size.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from faust.streams import current_event

from faust_eos import metrics
from faust_eos.errors import StoreRefused
from faust_eos.store import Store


class Sweep:
    """Deletes the entries of ``table`` whose value ``expired(value, *given)`` says may go.

    Only values are decoded to be looked at (a sweep looks at more entries than
    events add), so what decides expiry must be in the value, or among
    ``given``: what the sweep is called with (a clock's reading, a stream
    time), passed to ``expired`` after each value.

    Counted by table in ``faust_eos_table_entries_swept_total``. Call it once per event, inside the agent that writes ``table``: every
    ``every`` events of a partition it looks at the next ``every * keys_per_event``
    committed entries of that table partition. With ``keys_per_event`` above 1
    a sweep passes over the whole table faster than events add entries to it.
    """

    def __init__(self, table: Any, expired: Callable[[Any], bool], *, every: int = 100,
                 keys_per_event: int = 2) -> None:
        try:
            inspect.signature(expired).bind_partial(None)
        except TypeError:
            raise ValueError(f"expired={expired!r} must take the value of an entry (then what the sweep is "
                             "called with)") from None
        except ValueError:  # no signature to inspect (some builtins): trust it
            pass
        if every < 1 or keys_per_event < 1:
            raise ValueError(f"every={every} and keys_per_event={keys_per_event}: both must be at least 1")
        if table.is_global or table.use_partitioner:
            raise StoreRefused(f"table {table.name!r} writes keys to partitions other than its event's (global or "
                               "use_partitioner): a sweep deletes inside the events of the partition it sweeps")
        self.table = table
        self._expired = expired
        self._every = every
        self._per_sweep = every * keys_per_event
        self._events: dict[int, int] = {}  # table partition -> events since its last sweep
        self._cursors: dict[int, Optional[bytes]] = {}  # table partition -> last raw key looked at
        self._swept = metrics.entries_swept.labels(table.name)

    def __call__(self, *given: Any) -> int:
        """Count the current event; on every ``every``-th of its partition, sweep with ``given``. Returns the
        entries deleted."""
        event = current_event()
        if event is None:
            raise RuntimeError(f"the sweep of table {self.table.name!r} runs inside an event of the agent "
                               "that writes the table")
        partition = event.message.partition
        seen = self._events.get(partition, 0) + 1
        if seen < self._every:
            self._events[partition] = seen
            return 0
        self._events[partition] = 0
        return self.sweep(partition, *given)

    def sweep(self, partition: int, *given: Any) -> int:
        """Look at the next committed entries of ``partition`` and delete those ``expired(value, *given)``."""
        store = self.table.data
        if not isinstance(store, Store):
            raise StoreRefused(f"table {self.table.name!r} is swept only on the eos-rocksdb:// store, "
                               f"not {type(store).__name__}")
        entries, self._cursors[partition] = store.committed_entries(
            partition, after=self._cursors.get(partition), limit=self._per_sweep
        )
        deleted = 0
        for raw, value in entries:
            if self._expired(value, *given):
                del self.table[store.decoded_key(raw)]
                deleted += 1
        self._swept.inc(deleted)
        return deleted
