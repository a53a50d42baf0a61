"""The table class for apps on ``eos://``: ``faust.App(..., Table=faust_eos.Table)``.

A read through Faust's table asks the store twice (whether the key is there,
then its value), encoding the key each time and decoding the value; a write
goes through the changelog topic's ``send_soon``, a future of its own and the
producer before it is staged, and the store then encodes key and value again.
Inside an event, under exactly-once, on the ``eos-rocksdb://`` store, this
table does each once:

* a read encodes the key (remembered for str and bytes keys), and takes a
  write still waiting for its commit as the object written, undecoded;
* a write encodes key and value once, stages the changelog record with the
  transaction manager at once, and the store holds it with the value written.

Faust's table sensors still see every read, write and delete. Outside events,
under at-least-once, on another store, and for windowed tables, everything
takes Faust's path.

As with Faust's ``memory://`` store, a value read back before its commit is the
object that was written: change a value by writing a new one, not in place.
"""
from __future__ import annotations

from typing import Any, Optional

import faust
from faust.streams import current_event

from faust_eos.store import MISSING, Store


class Table(faust.Table):
    """A Faust table whose reads and writes inside events skip Faust's per-operation machinery."""

    def _fast_partition(self) -> Optional[int]:
        """The table partition of the event being processed, if this operation may take the short path."""
        event = current_event()
        if event is None:
            return None
        short = self.__dict__.get("_short_path")
        if short is None:  # decided once the worker runs: the store and the guarantee are known by then
            short = self.__dict__["_short_path"] = (
                self.app.in_transaction and isinstance(self.data, Store)
                and self.window is None and not self.use_partitioner and not self.is_global
            )
        if not short or not self.app.consumer.transactions.started:
            return None
        return event.message.partition

    def __getitem__(self, key: Any) -> Any:
        partition = self._fast_partition()
        if partition is None:
            return super().__getitem__(key)
        self.app.sensors.on_table_get(self, key)
        value = self.data.value_of(partition, self.data.raw_key(key))
        return self.__missing__(key) if value is MISSING else value

    def get(self, key: Any, default: Any = None) -> Any:
        partition = self._fast_partition()
        if partition is None:
            return super().get(key, default)
        self.app.sensors.on_table_get(self, key)
        value = self.data.value_of(partition, self.data.raw_key(key))
        if value is not MISSING:
            return value
        # as Faust's Mapping.get: a missing key reads as the table's default, if it has one
        return self.__missing__(key) if self.default is not None else default

    def __contains__(self, key: object) -> bool:
        partition = self._fast_partition()
        if partition is None:
            return super().__contains__(key)
        return self.data.holds_value(partition, self.data.raw_key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        partition = self._fast_partition()
        if partition is None:
            return super().__setitem__(key, value)
        store = self.data
        self.app.consumer.transactions.stage(
            self.changelog_topic.get_topic_name(), store.raw_key(key), store.raw_value(value), partition,
            None, None, None, table_value=value,
        )
        self.app.sensors.on_table_set(self, key, value)

    def __delitem__(self, key: Any) -> None:
        partition = self._fast_partition()
        if partition is None:
            return super().__delitem__(key)
        # as Faust's table: a tombstone is sent whether or not the key is there
        self.app.consumer.transactions.stage(
            self.changelog_topic.get_topic_name(), self.data.raw_key(key), None, partition, None, None, None,
        )
        self.app.sensors.on_table_del(self, key)
