"""Deleting a table's expired entries, a few at a time, inside the events that write the table.

A table that lives for months must shed what it no longer needs (dedup entries
past their retention, windows past their grace), or its local state and its
changelog grow for ever. A :class:`Sweep` does it inside the events of each
table partition: its deletes are the table's own, so each tombstone is staged
with the event being processed and commits in the same transaction as the
state that made the entry expire, never before it. Expiry must be for good (an
entry expires once a clock is past a time its value gives, and the clock never
goes back: the wall clock, a stream time); then a replay after a crash, which may
sweep at other events, never misses an entry its own state still needs.

Only committed entries are looked at (keys written since the last commit are
fresh by definition), through a cursor that moves on with each sweep and wraps
at the end, so a sweep costs the same whatever the table's size. Where every
entry lives at least a known time (``lifetime``), a partition whose last pass
found nothing that can expire soon is not looked at again until something can:
a table younger than its entries' lifetime then costs one pass per partition.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from faust.streams import current_event

from faust_eos import metrics
from faust_eos.errors import StoreRefused
from faust_eos.state.store import Store


class Sweep:
    """Deletes the entries of ``table`` whose ``expires_at(value)`` the clock is past.

    Called once per event, inside the agent that writes ``table``, with the
    clock the event runs at (a time, a stream time: a number that never goes
    back): every ``every`` events of a partition it looks at the next
    ``every * keys_per_event`` committed entries of that table partition and
    deletes those with ``clock > expires_at(value)``. With ``keys_per_event``
    above 1 a sweep passes over the whole table faster than events add entries
    to it. Only values are decoded to be looked at, so their expiry must be in them.

    ``lifetime``, if given, promises that every value written when the clock
    read ``c`` expires at ``c + lifetime`` or later (a retention counted from
    the write). Then, once a pass over a partition is done, the partition is
    not looked at again until the clock is past the earliest expiry the pass
    found (among the entries it kept, the writes not yet committed when it
    began, and ``lifetime`` after it began, which bounds what was written since).

    Counted by table in ``faust_eos_table_entries_swept_total``.
    """

    def __init__(self, table: Any, expires_at: Callable[[Any], float], *, every: int = 100,
                 keys_per_event: int = 2, lifetime: Optional[float] = None) -> None:
        try:
            inspect.signature(expires_at).bind(None)
        except TypeError:
            raise ValueError(f"expires_at={expires_at!r} must take the value of an entry, and only it") from None
        except ValueError:  # no signature to inspect (some builtins): trust it
            pass
        if every < 1 or keys_per_event < 1:
            raise ValueError(f"every={every} and keys_per_event={keys_per_event}: both must be at least 1")
        if lifetime is not None and not lifetime >= 0:
            raise ValueError(f"lifetime={lifetime!r}: a number of clock units, at least 0")
        if table.is_global or table.use_partitioner:
            raise StoreRefused(f"table {table.name!r} writes keys to partitions other than its event's (global or "
                               "use_partitioner): a sweep deletes inside the events of the partition it sweeps")
        self.table = table
        self._expires_at = expires_at
        self._every = every
        self._per_sweep = every * keys_per_event
        self._lifetime = lifetime
        self._events: dict[int, int] = {}  # table partition -> events since its last sweep
        self._cursors: dict[int, Optional[bytes]] = {}  # table partition -> last raw key looked at
        self._earliest: dict[int, float] = {}  # table partition -> earliest expiry of its pass under way
        self._rest_until: dict[int, float] = {}  # table partition -> clock up to which nothing in it expires
        self._swept = metrics.entries_swept.labels(table.name)

    def __call__(self, clock: float) -> int:
        """Count the current event; on every ``every``-th of its partition, sweep at ``clock``. Returns the
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
        rest_until = self._rest_until.get(partition)
        if rest_until is not None and clock <= rest_until:
            return 0
        return self.sweep(partition, clock)

    def sweep(self, partition: int, clock: float) -> int:
        """Look at the next committed entries of ``partition`` and delete those expired at ``clock``."""
        store = self.table.data
        if not isinstance(store, Store):
            raise StoreRefused(f"table {self.table.name!r} is swept only on the eos-rocksdb:// store, "
                               f"not {type(store).__name__}")
        after = self._cursors.get(partition)
        if self._lifetime is not None and after is None:  # a pass begins (each pass ends at the table's end)
            self._earliest[partition] = self._earliest_unseen(store, partition, clock)
        earliest = self._earliest.get(partition)  # None without a lifetime
        entries, cursor = store.committed_entries(partition, after=after, limit=self._per_sweep)
        deleted = 0
        for raw, value in entries:
            expires = self._expires_at(value)
            if clock > expires:
                del self.table[store.decoded_key(raw)]
                deleted += 1
            elif earliest is not None and expires < earliest:
                earliest = expires
        if earliest is not None:
            if cursor is None:  # the pass is done
                del self._earliest[partition]
                self._rest_until[partition] = earliest
            else:
                self._earliest[partition] = earliest
        self._cursors[partition] = cursor
        self._swept.inc(deleted)
        return deleted

    def _earliest_unseen(self, store: Store, partition: int, clock: float) -> float:
        """Of a pass beginning at ``clock``, the earliest expiry of what it may not see: what is written from
        now on (``lifetime`` later at the earliest), and what was written before and is not committed yet."""
        earliest = clock + self._lifetime  # type: ignore[operator]
        for value in store.uncommitted_values(partition):
            earliest = min(earliest, self._expires_at(value))
        return earliest
