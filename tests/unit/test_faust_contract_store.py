"""Contract of Faust's RocksDB table store and window expiry, as faust-eos relies on them.

faust_eos.faust_internals reads the store's ``_dbs`` (an open database per
table partition) and ``_encode_key``, and overrides its reads and writes
(``_get``, ``_set``, ``_del``, ...); ``eos-rocksdb://`` holds a write until its
changelog record commits, so it relies on a table sending that record before
it writes the store; it rebuilds a partition by deleting ``partition_path``, and
hooks ``__delitem__`` to send the tombstone of a window Faust expires. No
broker: the store is written the way recovery writes it.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from faust.stores import rocksdb
from faust.streams import current_event
from faust.types import TP
from faust_contract_support import worker_app

PARTITION = 3
WINDOW_KEY = ("k", (0.0, 9.9))  # a tumbling window that closed long ago


def table_on_rocksdb(tmp_path: Path, **options: Any) -> tuple[Any, list]:
    """A table on Faust's RocksDB store in ``tmp_path``, and the list its changelog sends land in."""
    app = worker_app(store="rocksdb://", tabledir=tmp_path, key_serializer="json")
    table = app.Table("counts", default=int, **options)
    sent: list = []
    app.producer.send_soon = sent.append
    app.producer.key_partition = lambda topic, key: TP(topic, PARTITION)
    return table, sent


def restore(store: Any, table: Any, key: Any, value: Any) -> Any:
    """Write ``key`` into ``store`` as recovery does: from the changelog record the table sends."""
    message = table.send_changelog(PARTITION, key, value).message
    changelog_tp = TP(table.changelog_topic.get_topic_name(), PARTITION)
    record = SimpleNamespace(tp=changelog_tp, offset=0, partition=PARTITION, key=message.key, value=message.value)
    store.apply_changelog_batch([SimpleNamespace(message=record)], None, None)
    return message


def restored_store(tmp_path: Path) -> Any:
    """Faust's RocksDB store of a table, holding "k" = 5 in PARTITION as a restore left it."""
    table, _ = table_on_rocksdb(tmp_path)
    restore(table.data, table, "k", 5)
    return table.data


def test_the_rocksdb_store_keeps_a_db_per_table_partition_holding_keys_as_encode_key_writes_them(tmp_path):
    async def scenario() -> None:
        table, _ = table_on_rocksdb(tmp_path)
        store = table.data
        assert isinstance(store, rocksdb.Store) and store._dbs == {}
        message = restore(store, table, "k", 5)
        assert list(store._dbs) == [PARTITION]
        assert store._dbs[PARTITION].get(store._encode_key("k")) == message.value
        assert store.partition_path(PARTITION).exists()
        assert store["k"] == 5

    asyncio.run(scenario())


def test_a_partition_db_closed_and_dropped_from_dbs_is_reopened_by_the_store_with_its_data(tmp_path):
    async def scenario() -> None:
        store = restored_store(tmp_path)
        store._dbs.pop(PARTITION).close()
        with pytest.raises(KeyError):
            store["k"]  # a closed partition holds nothing for the table
        reopened = store._db_for_partition(PARTITION)  # as on its next write or assignment
        assert store._dbs == {PARTITION: reopened}
        assert store["k"] == 5

    asyncio.run(scenario())


class OrderRecordingStore(rocksdb.Store):
    """Faust's RocksDB store, noting when the table writes and deletes a key."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.calls: list = []

    def _set(self, key: bytes, value: Any) -> None:
        self.calls.append(("store set", key))
        super()._set(key, value)

    def _del(self, key: bytes) -> None:
        self.calls.append(("store delete", key))
        super()._del(key)


def test_a_table_sends_a_keys_changelog_record_before_it_writes_or_deletes_the_key_in_its_store(tmp_path):
    async def scenario() -> None:
        table, _ = table_on_rocksdb(tmp_path)
        store = OrderRecordingStore(
            "rocksdb://", table.app, table, table_name=table.name, key_serializer="json", value_serializer="json"
        )
        table._data = store
        table.app.producer.send_soon = lambda fut: store.calls.append(("changelog", fut.message.key))
        table.partition_for_key = lambda key: PARTITION
        event = SimpleNamespace(message=SimpleNamespace(partition=PARTITION))
        store._dbs[PARTITION] = store._db_for_partition(PARTITION)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rocksdb, "current_event", lambda: event)
            table["k"] = 1
            del table["k"]
        key = store._encode_key("k")
        assert store.calls == [("changelog", key), ("store set", key), ("changelog", key), ("store delete", key)]

    asyncio.run(scenario())


class RecordingStore(rocksdb.Store):
    """Faust's RocksDB store, noting each key deleted through ``__delitem__`` and the event current then."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.deleted: list = []

    def __delitem__(self, key: Any) -> None:
        self.deleted.append((key, current_event()))
        super().__delitem__(key)


def test_window_expiry_deletes_expired_keys_through_the_stores_delitem_outside_any_event_and_sends_nothing(
    tmp_path,
):
    async def scenario() -> None:
        windowed, sent = table_on_rocksdb(tmp_path, use_partitioner=True)
        table = windowed.tumbling(10, expires=10).table
        store = RecordingStore(
            "rocksdb://", table.app, table, table_name=table.name, key_serializer="json", value_serializer="json"
        )
        table._data = store
        restore(store, table, WINDOW_KEY, 5)
        table.on_key_set(WINDOW_KEY, 5)  # what a table write does after storing: changelog, then expiry
        sends_before_expiry = len(sent)
        await table._del_old_keys()
        assert store.deleted == [(WINDOW_KEY, None)]
        assert store._dbs[PARTITION].get(store._encode_key(WINDOW_KEY)) is None
        assert len(sent) == sends_before_expiry  # Faust sends no tombstone of its own

    asyncio.run(scenario())
