"""The RocksDB store's and tables' private parts: reads, writes, open databases.

Each is named, with the reason, in :mod:`faust_eos.faust_internals`.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from faust.stores import rocksdb
from faust.types import TP


def table_partition_dbs(store: Any) -> Optional[Mapping[int, Any]]:
    """A RocksDB store's open database per table partition; None for other stores."""
    return getattr(store, "_dbs", None)


#: values a read may share with the write it reads: immutable, and JSON gives them back as they were
IMMUTABLE = (str, int, float, bool)


def shareable(value: Any) -> bool:
    """Whether ``value`` is a str, int, finite float or bool: a read may be handed the written object itself."""
    kind = type(value)
    return kind in IMMUTABLE and (kind is not float or math.isfinite(value))


def has_changelog_callback(table: Any) -> bool:
    """Whether ``table`` was given an ``on_changelog_event`` callback."""
    return table._on_changelog_event is not None


def close_table_partition(store: Any, partition: int) -> None:
    """Close a RocksDB store's database of ``partition``, if open (it reopens on next use)."""
    db = store._dbs.pop(partition, None)
    if db is not None:
        db.close()


class StoreHooks(rocksdb.Store):
    """Faust's RocksDB store with the private hooks faust-eos overrides under public names.

    Keys and values are bytes, as the changelog carries them. Each hook defaults
    to Faust's own behaviour.
    """

    def _get(self, key: bytes) -> Optional[bytes]:
        return self.read_key(key)

    def read_key(self, key: bytes) -> Optional[bytes]:
        """The value of ``key``, None if absent."""
        return super()._get(key)

    def _contains(self, key: bytes) -> bool:
        return self.holds_key(key)

    def holds_key(self, key: bytes) -> bool:
        return super()._contains(key)

    def _set(self, key: bytes, value: Optional[bytes]) -> None:
        self.write_key(key, value)

    def write_key(self, key: bytes, value: Optional[bytes]) -> None:
        """A table write, called after the table sent the key's changelog record."""
        super()._set(key, value)

    def _del(self, key: bytes) -> None:
        self.delete_key(key)

    def delete_key(self, key: bytes) -> None:
        """A table delete, called after the table sent the key's tombstone (inside an event)."""
        super()._del(key)

    def _iteritems(self) -> Any:
        return self.items_of_active_partitions()

    def items_of_active_partitions(self) -> Any:
        """Every (key, value) of the table partitions this worker serves."""
        return super()._iteritems()

    def _iterkeys(self) -> Any:
        return (key for key, _ in self.items_of_active_partitions())

    def _itervalues(self) -> Any:
        return (value for _, value in self.items_of_active_partitions())

    def _size(self) -> int:
        return sum(1 for _ in self.items_of_active_partitions())

    def partition_db(self, partition: int) -> Any:
        """The database of table partition ``partition``, opened if it is not."""
        return self._db_for_partition(partition)

    def active_partition_dbs(self) -> dict[int, Any]:
        """The open database of each table partition this worker serves actively (all of a global table's)."""
        actives = self.app.assignor.assigned_actives()
        topic = self.table.changelog_topic.get_topic_name()
        return {
            partition: db
            for partition, db in list(self._dbs.items())
            if self.table.is_global or TP(topic, partition) in actives
        }
