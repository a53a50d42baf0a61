"""faust_eos.Table: inside an event, reads and writes as Faust's table makes them, without its per-operation path.

A worker app's transaction manager, started without a broker (nothing is
produced), and a real eos-rocksdb store in a temporary directory. A commit is
played by handing the staged records to the tables as a committed round does.
"""
from __future__ import annotations

import asyncio
import weakref
from types import SimpleNamespace
from typing import Any, Optional

import faust
import pytest
from aiokafka.structs import RecordMetadata
from faust.exceptions import PartitionsMismatch
from faust.models.fields import StringField
from faust.streams import _current_event
from faust.types import TP
from faust_contract_support import worker_app
from store_support import inside_event

import faust_eos
from faust_eos.state.staging import SourceTP

CHANGELOG = "contract-totals-changelog"


class Total(faust.Record, serializer="json"):
    merchant_id: str
    cents: int


class RecordingSensor(faust.Sensor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def on_table_get(self, table: Any, key: Any) -> None:
        self.seen.append(("get", key))

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        self.seen.append(("set", key))

    def on_table_del(self, table: Any, key: Any) -> None:
        self.seen.append(("del", key))


def run(tmp_path, scenario, **table_options: Any) -> None:
    """``scenario(app, table, transactions)`` on a started transaction manager."""
    async def started() -> None:
        app = worker_app(Table=faust_eos.Table, store="eos-rocksdb://", tabledir=tmp_path)
        table = app.Table("totals", **{"value_type": Total, "partitions": 4, **table_options})
        transactions = app.consumer.transactions
        await transactions.start()
        try:
            await scenario(app, table, transactions)
        finally:
            await transactions.stop()

    asyncio.run(started())


def run_at_least_once(tmp_path, scenario) -> None:
    """``scenario(app, table, held)`` under at_least_once, ``held`` the records waiting for their commit."""
    async def started() -> None:
        app = worker_app("at_least_once", Table=faust_eos.Table, store="eos-rocksdb://", tabledir=tmp_path)
        table = app.Table("totals", value_type=Total, partitions=4)
        held = app.consumer.guarantee
        try:
            await scenario(app, table, held)
        finally:
            await held.stop()

    asyncio.run(started())


def committed(transactions: Any, offset: int) -> None:
    """The table writes of events of payments[2] below ``offset`` commit, at changelog offsets from 100."""
    records = transactions.tables.changelog_records({SourceTP("payments", 2): offset})  # as a round takes them
    metadata = [RecordMetadata(r.topic, r.partition, TP(r.topic, r.partition), 100 + i, 0, 0, -1)
                for i, r in enumerate(records)]
    transactions.tables.committed(records, metadata)


def test_a_write_is_kept_with_its_event_encoded_as_faust_s_own_table_encodes_it(tmp_path):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=7):
            table["m1"] = Total("m1", 5)
        with inside_event(offset=8):
            faust.Table.__setitem__(table, "m2", Total("m2", 6))  # Faust's own path, for comparison
        ours, fausts = sorted(transactions.tables.changelog_records({SourceTP("payments", 2): 9}),
                              key=lambda record: record.source_offset)
        assert (ours.topic, ours.partition, ours.source_offset) == (CHANGELOG, 2, 7)
        assert (fausts.topic, fausts.partition, fausts.source_offset) == (CHANGELOG, 2, 8)
        assert ours.key == fausts.key.replace(b"m2", b"m1")
        assert ours.value == fausts.value.replace(b"m2", b"m1").replace(b"6", b"5")
        assert ours.timestamp_ms is None and ours.headers is None

    run(tmp_path, scenario)


def test_a_write_reads_back_before_and_after_its_commit_each_read_a_value_of_its_own(tmp_path):
    async def scenario(app, table, transactions) -> None:
        total = Total("m1", 5)
        with inside_event(offset=7):
            table["m1"] = total
            read = table["m1"]
            assert read == total and read is not total and "m1" in table
            read.cents = 99  # changed in place, never written back: the table does not see it
            assert table.get("m1") == total
        committed(transactions, offset=8)
        with inside_event(offset=8):
            assert table["m1"] == total and "m1" in table
        assert table.data.partition_db(2).get(table.data.raw_key("m1")) is not None

    run(tmp_path, scenario)


def test_a_value_changed_in_place_after_its_write_still_reads_as_written(tmp_path):
    async def scenario(app, table, transactions) -> None:
        total = Total("m1", 5)
        with inside_event(offset=7):
            table["m1"] = total
            total.cents = 99  # never written back
            assert table["m1"] == Total("m1", 5)
        committed(transactions, offset=8)
        with inside_event(offset=8):
            assert table["m1"] == Total("m1", 5)

    run(tmp_path, scenario)


def test_a_key_written_since_the_last_commit_with_a_plain_value_reads_as_written_and_a_record_decodes_on_each_read(
        tmp_path, monkeypatch):
    decoded: list = []

    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=7):
            table["p2"] = 1.5  # the first write of a type decodes once, to check it reads back
            decode = table.data.decoded
            monkeypatch.setattr(table.data, "decoded", lambda raw: decoded.append(raw) or decode(raw))
            table["p2"] = 2.5
            assert (table["p2"], table.get("p2")) == (2.5, 2.5)
            assert not decoded
            table["m1"] = Total("m1", 5)  # a record: nothing kept but its bytes; each read a value of its own
            assert not decoded
            first, second = table["m1"], table["m1"]
            assert first == second == Total("m1", 5) and first is not second
            assert len(decoded) == 2
        committed(transactions, offset=8)
        with inside_event(offset=8):
            assert table["p2"] == 2.5  # committed: read from RocksDB, decoded
        assert len(decoded) == 3

    run(tmp_path, scenario, value_type=None)


class Noted(faust.Record, serializer="json"):
    merchant_id: str
    note: str = StringField(required=False, default="", exclude=True)  # never encoded


class Labelled(faust.Record, serializer="json"):
    merchant_id: str
    label: Optional[str] = "none"  # decoding gives None as the default


class Doubled(faust.Record, serializer="json"):
    cents: int

    def __post_init__(self) -> None:
        self.double = self.cents * 2


@pytest.mark.parametrize("first, second, reads_as", [
    (Noted("m1"), Noted("m1", note="kept in memory only"), Noted("m1")),
    (Labelled("m1", label="a"), Labelled("m1", label=None), Labelled("m1", label="none")),
    (Total("m1", 5), Total("m1", 6).derive(), Total("m1", 6)),
])
def test_a_value_reads_as_its_encoding_decodes_before_and_after_its_commit_whatever_was_written_before(
        tmp_path, first, second, reads_as):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=6):
            table["m1"] = first
        with inside_event(offset=7):
            table["m1"] = second
            before = table["m1"]
        committed(transactions, offset=8)
        with inside_event(offset=8):
            after = table["m1"]
        for read in (before, after):
            assert read == reads_as and read.__dict__ == reads_as.__dict__

    run(tmp_path, scenario, value_type=type(first))


def test_an_attribute_that_is_not_a_field_reads_as_decoding_gives_it(tmp_path):
    async def scenario(app, table, transactions) -> None:
        total = Total("m1", 5)
        with inside_event(offset=6):
            table["m1"] = total
        total.extra = 1
        with inside_event(offset=7):
            table["m1"] = total
            assert not hasattr(table["m1"], "extra")
            doubled = Doubled(2)
            doubled.cents = 10  # double stays 4 here; decoding recomputes it
            table["d"] = doubled
            assert table["d"].double == 20

    run(tmp_path, scenario, value_type=None)


def test_written_keys_leave_nothing_behind_once_committed_even_when_a_later_write_replaced_them(tmp_path):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=7):
            for value in (1.5, 2.5, 3.5):
                table["p1"] = value
            table["p2"] = 1.5
            del table["p2"]
        committed(transactions, offset=8)
        assert table.data.held() == 0
        with inside_event(offset=8):
            assert table["p1"] == 3.5 and "p2" not in table

    run(tmp_path, scenario, value_type=None)


def test_plain_values_read_back_as_written_and_numbers_keep_their_type(tmp_path):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=7):
            for key, value in (("f", 1.5), ("i", 2), ("s", "x"), ("b", True)):
                table[key] = value
            table["f"] = 2.0
            assert [type(table[k]) for k in ("f", "i", "s", "b")] == [float, int, str, bool]
            assert (table["f"], table["i"], table["s"], table["b"]) == (2.0, 2, "x", True)

    run(tmp_path, scenario, value_type=None)


def test_under_at_least_once_a_write_is_held_with_its_event_and_reads_back_until_and_after_its_commit(tmp_path):
    async def scenario(app, table, held) -> None:
        with inside_event(offset=7):
            table["m1"] = Total("m1", 5)
            assert table["m1"] == Total("m1", 5)
        committed(held, offset=8)
        with inside_event(offset=8):
            assert table["m1"] == Total("m1", 5)
        assert table.data.partition_db(2).get(table.data.raw_key("m1")) is not None
        assert len(held.staging) == 0

    run_at_least_once(tmp_path, scenario)


def test_a_value_reads_back_as_its_encoding_decodes_whether_committed_or_not(tmp_path):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=1):
            table["k"] = {1: "a"}  # JSON keys are strings
            assert table["k"] == {"1": "a"}
        committed(transactions, offset=2)
        with inside_event(offset=2):
            assert table["k"] == {"1": "a"}

    run(tmp_path, scenario, value_type=None)


def test_a_missing_key_reads_as_faust_reads_it_with_and_without_a_default(tmp_path):
    async def without_default(app, table, transactions) -> None:
        with inside_event(offset=1):
            assert table.get("nobody") is None and table.get("nobody", "fallback") == "fallback"
            assert "nobody" not in table
            try:
                table["nobody"]
            except KeyError:
                pass
            else:
                raise AssertionError("a missing key without a default raises KeyError")

    run(tmp_path, without_default)

    async def with_default(app, table, transactions) -> None:
        with inside_event(offset=1):
            assert table["nobody"] == Total("", 0) and table.get("nobody", "fallback") == Total("", 0)
            assert "nobody" not in table  # reading a default does not store it

    run(tmp_path / "d", with_default, default=lambda: Total("", 0))


def test_a_delete_stages_a_tombstone_and_hides_the_committed_value_until_it_commits(tmp_path):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=1):
            table["m1"] = Total("m1", 5)
        committed(transactions, offset=2)
        with inside_event(offset=2):
            del table["m1"]
            assert "m1" not in table and table.get("m1") is None
        [tombstone] = transactions.tables.changelog_records({SourceTP("payments", 2): 3})
        assert (tombstone.key, tombstone.value, tombstone.source_offset) == (table.data.raw_key("m1"), None, 2)

    run(tmp_path, scenario)


def test_faust_s_table_sensors_see_every_read_write_and_delete(tmp_path):
    async def scenario(app, table, transactions) -> None:
        sensor = RecordingSensor()
        app.sensors.add(sensor)
        with inside_event(offset=1):
            table["m1"] = Total("m1", 5)
            table.get("m1")
            table["m1"]
            del table["m1"]
        assert sensor.seen == [("set", "m1"), ("get", "m1"), ("get", "m1"), ("del", "m1")]

    run(tmp_path, scenario)


def test_outside_events_a_read_takes_faust_s_own_path_and_sees_writes_waiting_for_their_commit(tmp_path):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=1):
            table["m1"] = Total("m1", 5)
        assert table["m1"] == Total("m1", 5) and "m1" in table and table.get("m2") is None

    run(tmp_path, scenario)


class TimedEvent:
    message = SimpleNamespace(topic="payments", partition=2, offset=1, timestamp=90.0)


def write_windowed_counting_faust_sends(table: Any, transactions: Any, value: Total) -> list:
    """Write ``value`` to a tumbling window of ``table`` inside a timed event; the sends taking Faust's path."""
    sent: list = []
    stage_future_message = transactions.stage_future_message

    def through_faust(fut: Any) -> None:  # Faust's path: the changelog topic's send_soon
        sent.append(fut)
        stage_future_message(fut)

    transactions.stage_future_message = through_faust
    windowed = table.tumbling(60)
    event = TimedEvent()
    token = _current_event.set(weakref.ref(event))
    try:
        windowed["m1"] = value
    finally:
        _current_event.reset(token)
    return sent


def test_a_windowed_table_writes_through_faust_s_own_path(tmp_path):
    async def scenario(app, table, transactions) -> None:
        sent = write_windowed_counting_faust_sends(table, transactions, Total("m1", 5))
        assert len(sent) == 1 and transactions.tables.held() == 1

    run(tmp_path, scenario)


def test_a_table_windowed_after_its_first_use_takes_faust_s_path_from_then_on(tmp_path):
    async def scenario(app, table, transactions) -> None:
        with inside_event(offset=1):
            table["m1"] = Total("m1", 5)  # the short path
        assert len(write_windowed_counting_faust_sends(table, transactions, Total("m1", 6))) == 1

    run(tmp_path, scenario)


def test_a_write_from_an_input_topic_with_another_partition_count_than_the_changelog_is_refused(tmp_path):
    async def scenario(app, table, transactions) -> None:
        counts = {"payments": 6, CHANGELOG: 4}
        app.consumer.topic_partitions = counts.get
        with inside_event(offset=1), pytest.raises(PartitionsMismatch):
            table["m1"] = Total("m1", 5)
        assert not transactions.staging.pending()

    run(tmp_path, scenario)
