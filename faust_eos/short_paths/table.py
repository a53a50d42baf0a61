"""The table class for apps on ``eos://``: ``faust.App(..., Table=faust_eos.Table)``.

A read through Faust's table asks the store twice (whether the key is there,
then its value), encoding the key each time and decoding the value; a write
goes through the changelog topic's ``send_soon``, a future of its own and the
producer before it is staged, and the store then encodes key and value again.
Inside an event, on the ``eos-rocksdb://`` store, this table does each once:

* a read encodes the key and asks the store once; each read gets a value of
  its own, as from Faust's table, so a value changed in place but not written
  back changes nothing. A key written since the last commit reads from memory,
  plain values (str, int, float, bool) without decoding, anything else decoded from
  the write's bytes (:mod:`faust_eos.state.table_writes`);
* a write encodes key and value once and is kept by the table with its event,
  under either guarantee, until the commit writes the key's newest value to
  the changelog, once (the partition, and the check that the input topic has
  as many partitions as the changelog, are Faust's own, once per event).

Faust's table sensors still see every read, write and delete. Outside events,
on another store, for windowed tables and for tables with their own
``schema``, everything takes Faust's path.
"""
from __future__ import annotations

from typing import Any, Optional, cast

import faust

from faust_eos.short_paths.event_path import EventPath, EventPathsOwner
from faust_eos.state.store import MISSING, Store


class Table(faust.Table[Any, Any]):
    """A Faust table whose reads and writes inside events skip Faust's per-operation machinery."""

    def _fast_path(self) -> Optional[EventPath]:
        """The path of the event being processed, if this operation may take the short path."""
        if self.window is not None:  # a table may be windowed after its first use
            return None
        short = self.__dict__.get("_short_path")
        if short is None:  # decided once the worker runs: the store is known by then
            short = self.__dict__["_short_path"] = (
                isinstance(self.data, Store) and self.schema is None and not self.use_partitioner
                and not self.is_global
            )
        return cast(EventPathsOwner, self.app.consumer).event_paths.current() if short else None

    def __getitem__(self, key: Any) -> Any:
        path = self._fast_path()
        if path is None:
            return super().__getitem__(key)
        value = self._read(path, key)
        return self.__missing__(key) if value is MISSING else value

    def get(self, key: Any, default: Any = None) -> Any:
        path = self._fast_path()
        if path is None:
            return super().get(key, default)
        value = self._read(path, key)
        if value is not MISSING:
            return value
        # as Faust's Mapping.get: a missing key reads as the table's default, if it has one
        return self.__missing__(key) if self.default is not None else default

    def __contains__(self, key: object) -> bool:
        path = self._fast_path()
        if path is None:
            return super().__contains__(key)
        store = cast(Store, self.data)  # the short path is on this store alone
        return store.holds_value(path.partition, store.raw_key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        path = self._fast_path()
        if path is None:
            return super().__setitem__(key, value)
        store = cast(Store, self.data)  # the short path is on this store alone
        raw_key, raw_value = store.raw_key(key), store.raw_value(value)
        self._write(path, key, raw_key, value, raw_value)
        for sensor in path.table_sensors:
            sensor.on_table_set(self, key, value)

    def __delitem__(self, key: Any) -> None:
        path = self._fast_path()
        if path is None:
            return super().__delitem__(key)
        # as Faust's: a tombstone whether or not the key is there
        self._write(path, key, cast(Store, self.data).raw_key(key), None, None)
        for sensor in path.table_sensors:
            sensor.on_table_del(self, key)

    def _read(self, path: EventPath, key: Any) -> Any:
        for sensor in path.table_sensors:
            sensor.on_table_get(self, key)
        store = cast(Store, self.data)  # the short path is on this store alone
        return store.value_of(path.partition, store.raw_key(key))

    def _write(self, path: EventPath, key: Any, raw_key: bytes, value: Any, raw_value: Optional[bytes]) -> None:
        """Keep a write (``raw_value`` None: a delete) with the event being processed, until it commits."""
        if self.__dict__.get("_checked_event") is not path.event:
            self.partition_for_key(key)  # Faust's check that the input has as many partitions as the changelog
            self.__dict__["_checked_event"] = path.event
        path.tables.write(cast(Store, self.data), path.partition, raw_key, value, raw_value, path.source, path.offset)
