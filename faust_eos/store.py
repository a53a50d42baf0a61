"""``eos-rocksdb://``: Faust's RocksDB store, whose window expiry also reaches the changelog.

Faust expires the old windows of a windowed table (``.tumbling()``,
``.hopping()`` with ``expires=``) by deleting them from the local store only:
their changelog keeps them, so a restore brings expired windows back, and a
late event then adds to a window that a worker which never restored had
closed. With this store each expired key is also deleted from the changelog.
Under exactly-once that tombstone commits in the table partition's next
transaction, with the input partition that writes the table; under
at-least-once it is sent at once.

Use it for windowed tables with expiry under ``eos://``, as the app's store
(Faust ignores a table's own ``store=`` URL when nothing follows its scheme)::

    app = faust.App(..., broker="eos://...", store="eos-rocksdb://")
"""
from __future__ import annotations

from typing import Any

from faust.stores import rocksdb
from faust.streams import current_event

from faust_eos import faust_internals


class Store(rocksdb.Store):
    """RocksDB store: a key deleted outside any event (a window's expiry) is deleted in the changelog too."""

    def __delitem__(self, key: Any) -> None:
        # Inside an event the table has already sent the key's tombstone; the
        # store is asked to delete outside one only by Faust's window expiry.
        if current_event() is None:
            for partition in faust_internals.partitions_holding(self, key):
                self.table.send_changelog(partition, key, None, value_serializer="raw")
        super().__delitem__(key)


def expires_windows(table: Any) -> bool:
    """Whether Faust deletes ``table``'s old windows."""
    window = getattr(table, "window", None)
    return window is not None and window.expires is not None
