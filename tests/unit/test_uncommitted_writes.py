"""A table's writes not yet committed: read at once, committed once per key, the newest below the commit's offset."""
from __future__ import annotations

import json
from typing import Any

import faust

from faust_eos.state.staging import SourceTP
from faust_eos.state.table_writes import DECODE, DELETED, TableWrites

A, B = SourceTP("payments", 0), SourceTP("refunds", 0)


class Total(faust.Record, serializer="json"):
    merchant_id: str
    cents: int


class Doubled(faust.Record, serializer="json"):
    cents: int

    def __post_init__(self) -> None:
        self.double = self.cents * 2


def writes() -> tuple[TableWrites, list]:
    """Writes whose values decode from JSON (records by their class's own loads), the decodes counted."""
    decoded: list = []

    def decode(raw: bytes) -> Any:
        decoded.append(raw)
        data = json.loads(raw)
        if isinstance(data, dict):
            return {"Total": Total, "Doubled": Doubled}[data.pop("__faust")["ns"].rsplit(".", 1)[1]](**data)
        return data

    return TableWrites(decode), decoded


def write(w: TableWrites, key: bytes, value: Any, offset: int, source: SourceTP = A) -> int:
    raw = None if value is DELETED else (value.dumps() if isinstance(value, faust.Record)
                                         else json.dumps(value).encode())
    return w.write(0, key, value, raw, source, offset)


def test_a_plain_value_reads_back_as_written_without_decoding():
    w, decoded = writes()
    write(w, b"n", 1.5, 1)
    first_decodes = len(decoded)  # each type's first value is decoded once, to check it reads back
    write(w, b"n", 2.5, 2)
    assert w.read(w.latest(0, b"n")) == 2.5
    assert len(decoded) == first_decodes


def test_a_record_is_kept_as_its_bytes_and_each_read_decodes_a_value_of_its_own():
    w, decoded = writes()
    total = Total("m1", 6)
    write(w, b"t", total, 1)
    assert not decoded
    total.cents = 99  # changed after its write: the table does not see it
    first, second = w.read(w.latest(0, b"t")), w.read(w.latest(0, b"t"))
    assert first == second == Total("m1", 6) and first is not second
    assert len(decoded) == 2
    doubled = Doubled(2)
    doubled.cents = 10  # double stays 4 here; decoding recomputes it
    write(w, b"d", doubled, 1)
    assert w.latest(0, b"d").value is DECODE and w.read(w.latest(0, b"d")).double == 20


def test_a_plain_type_whose_values_do_not_read_back_as_written_is_decoded_on_every_read():
    w, decoded = writes()
    w.write(0, b"s", "1", b"1", A, 1)  # encoded as b"1", it decodes as the int 1: str does not read back as written
    assert w.latest(0, b"s").value is DECODE and w.read(w.latest(0, b"s")) == 1


def test_writes_of_one_event_replace_each_other_and_later_events_keep_the_earlier_write_until_a_commit():
    w, _ = writes()
    assert [write(w, b"k", v, offset) for v, offset in ((1, 5), (2, 5), (3, 6))] == [1, 0, 1]
    assert w.count == 2 and w.read(w.latest(0, b"k")) == 3


def test_a_commit_takes_per_key_the_newest_write_of_an_event_below_its_offset():
    w, _ = writes()
    write(w, b"k", 1, 5)
    write(w, b"k", 2, 6)
    write(w, b"j", 1, 9)
    taken = w.committable(0, {A: 7})
    assert [(key, write_.offset, w.read(write_)) for key, write_ in taken] == [(b"k", 6, 2)]
    assert w.committable(0, {B: 100}) == []


def test_a_committed_write_is_forgotten_with_the_older_ones_it_superseded_and_a_newer_one_stays():
    w, _ = writes()
    told: list = []
    w.write(0, b"k", 1, b"1", A, 4, told.append)
    write(w, b"k", 2, 5)
    write(w, b"k", 3, 8)
    [(key, taken)] = w.committable(0, {A: 6})
    assert w.committed(0, key, taken, "md-of-5") == 2
    assert told == ["md-of-5"]  # the superseded write is told it is durable with the write that replaced it
    assert w.count == 1 and w.read(w.latest(0, b"k")) == 3 and w.latest(0, b"k").older is None


def test_dropping_the_writes_of_one_input_partition_keeps_the_others_in_order():
    w, _ = writes()
    write(w, b"k", 1, 1, A)
    write(w, b"k", 2, 1, B)
    write(w, b"k", 3, 2, A)
    write(w, b"j", 1, 3, A)
    assert w.drop(0, [A]) == 3
    assert w.read(w.latest(0, b"k")) == 2 and w.latest(0, b"j") is None and w.count == 1
    assert w.drop(0) == 1 and w.latest(0, b"k") is None and w.count == 0


def test_a_delete_reads_as_deleted_and_commits_as_a_tombstone():
    w, _ = writes()
    write(w, b"k", 1, 1)
    write(w, b"k", DELETED, 2)
    latest = w.latest(0, b"k")
    assert w.read(latest) is DELETED and latest.raw is None
    assert [(key, taken.raw) for key, taken in w.committable(0, {A: 3})] == [(b"k", None)]
