"""``aggregate`` uses a table per batch: each key read from the table once, each written key written once,
at the batch's end, with its last value."""
from __future__ import annotations

from typing import Any

from agents.payments import BatchTable


class CountingTable:
    """A table that counts its reads and keeps its writes in order."""

    def __init__(self, held: dict[str, Any]) -> None:
        self.held = dict(held)
        self.reads: list[str] = []
        self.writes: list[tuple[str, Any]] = []

    def get(self, key: str) -> Any:
        self.reads.append(key)
        return self.held.get(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self.writes.append((key, value))
        self.held[key] = value


def test_a_key_is_read_from_the_table_once_then_as_the_batch_left_it():
    table = CountingTable({"m1": 10})
    batch = BatchTable(table)
    assert batch.get("m1") == 10
    batch["m1"] = 11
    assert batch.get("m1") == 11 and batch.get("m2") is None and batch.get("m2") is None
    assert table.reads == ["m1", "m2"]


def test_nothing_reaches_the_table_before_write_back_and_each_written_key_once_after():
    table = CountingTable({"m1": 10, "m3": 30})
    batch = BatchTable(table)
    for value in (11, 12, 13):
        batch["m1"] = value
    batch["m2"] = 1
    batch.get("m3")
    assert table.writes == []
    batch.write_back()
    assert sorted(table.writes) == [("m1", 13), ("m2", 1)]  # m3 was only read: not written back


class SweptTable(CountingTable):
    """A table whose entries a sweep may delete meanwhile."""

    def __contains__(self, key: str) -> bool:
        return key in self.held

    def sweep(self, key: str) -> None:
        del self.held[key]


def test_an_entry_a_sweep_deleted_during_the_batch_is_not_written_back():
    table = SweptTable({"w1": 1, "w2": 2})
    batch = BatchTable(table)
    batch["w1"] = batch.get("w1") + 1  # counted in w1, then w1 closed and was swept
    batch["w2"] = batch.get("w2") + 1
    batch["w3"] = 1  # new in this batch: no sweep saw it
    table.sweep("w1")
    batch.write_back(swept=True)
    assert sorted(table.writes) == [("w2", 3), ("w3", 1)] and "w1" not in table


def test_without_a_sweep_in_the_batch_every_written_key_is_written_back_unchecked():
    table = CountingTable({"w1": 1})  # no __contains__: write_back must not ask
    batch = BatchTable(table)
    batch["w1"] = batch.get("w1") + 1
    batch.write_back()
    assert table.writes == [("w1", 2)]
