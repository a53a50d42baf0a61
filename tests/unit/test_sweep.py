"""The sweep: a table's expired entries deleted inside the events of their partition, a few per event.

A real eos-rocksdb store, no broker (:mod:`store_support`).
"""
from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from store_support import PARTITION, Table, event_loop_for_faust, inside_event  # noqa: F401 (an autouse fixture)

from faust_eos import StoreRefused
from faust_eos.state.sweep import Sweep


def swept(table: str) -> float:
    return REGISTRY.get_sample_value("faust_eos_table_entries_swept_total", {"table": table}) or 0.0


def committed_table(tmp_path, values: dict[str, int]) -> Table:
    t = Table(tmp_path)
    with inside_event(1):
        for key, value in values.items():
            t.table[key] = value
    t.commit(checkpoint=len(values) - 1)
    return t


def test_expired_committed_entries_are_deleted_through_the_table_and_the_rest_stay(tmp_path):
    t = committed_table(tmp_path, {"old-1": 1, "new-1": 100, "old-2": 2})
    sweep = Sweep(t.table, lambda value: value, every=1, keys_per_event=10)  # each value is its expiry
    swept_before = swept("totals")
    with inside_event(2):
        assert sweep(10) == 2
        assert "old-1" not in t.table and "old-2" not in t.table and t.table["new-1"] == 100
    assert swept("totals") == swept_before + 2
    tombstones = sorted((r.key, r.value) for r in t.pending())
    assert tombstones == [(t.store._encode_key("old-1"), None), (t.store._encode_key("old-2"), None)]
    t.commit(checkpoint=4)
    assert t.on_disk("old-1") is None and t.on_disk("new-1") is not None


def test_a_key_written_since_the_last_commit_is_not_looked_at(tmp_path):
    t = committed_table(tmp_path, {"a": 1})
    with inside_event(2):
        t.table["a"] = 2  # rewritten, not committed yet: fresh
    looked_at = []
    sweep = Sweep(t.table, lambda value: looked_at.append(value) or 0, every=1)
    with inside_event(3):
        assert sweep(10) == 0 and t.table["a"] == 2
    assert looked_at == []


def test_a_sweep_runs_every_n_events_of_a_partition_and_its_cursor_covers_the_table_then_wraps(tmp_path):
    t = committed_table(tmp_path, {f"k{i}": i for i in range(10)})
    looked_at: list[int] = []
    sweep = Sweep(t.table, lambda value: looked_at.append(value) or 100, every=2, keys_per_event=2)
    keys = list(range(10))  # the values of k0..k9, in key order
    for offset in range(2, 12):  # 10 events: 5 sweeps of up to 4 entries each (the store's own keys count too)
        with inside_event(offset):
            sweep(0)
    assert looked_at[:10] == keys  # one pass over the table, in key order
    assert 0 < len(looked_at) - 10 < 10 and looked_at[10:] == keys[:len(looked_at) - 10]  # then from the start
    swept = len(looked_at)
    with inside_event(20, partition=PARTITION + 1):
        sweep(0)  # the first event of another partition: that partition counts its own events
    assert len(looked_at) == swept


def test_a_sweep_outside_an_event_is_refused(tmp_path):
    t = committed_table(tmp_path, {"a": 1})
    with pytest.raises(RuntimeError, match="inside an event"):
        Sweep(t.table, lambda value: 0)(10)


def test_a_sweep_that_never_runs_is_refused(tmp_path):
    t = Table(tmp_path)
    with pytest.raises(ValueError, match="at least 1"):
        Sweep(t.table, lambda value: 0, every=0)


def test_a_table_that_writes_other_partitions_than_its_events_cannot_be_swept(tmp_path):
    t = Table(tmp_path)
    t.table.use_partitioner = True
    with pytest.raises(StoreRefused, match="use_partitioner"):
        Sweep(t.table, lambda value: 0)


def test_an_expiry_that_takes_anything_but_the_value_is_refused_at_once(tmp_path):
    t = Table(tmp_path)
    with pytest.raises(ValueError, match="must take the value of an entry"):
        Sweep(t.table, lambda: 0)
    with pytest.raises(ValueError, match="must take the value of an entry"):
        Sweep(t.table, lambda value, now: 0)


def test_a_negative_lifetime_is_refused(tmp_path):
    t = Table(tmp_path)
    with pytest.raises(ValueError, match="lifetime"):
        Sweep(t.table, lambda value: value, lifetime=-1)


def test_an_entry_goes_once_the_clock_is_past_its_expiry(tmp_path):
    t = committed_table(tmp_path, {"early": 5, "late": 50})
    sweep = Sweep(t.table, lambda value: value, every=1, keys_per_event=10)
    with inside_event(2):
        assert sweep(5) == 0
        assert sweep(5.1) == 1
        assert "early" not in t.table and t.table["late"] == 50


# --- resting while nothing can expire (a lifetime given) ----------------------------------------------

def looking(looked_at: list):
    """An expiry that records each value it is asked about; each value is its own expiry."""
    return lambda value: looked_at.append(value) or value


def test_with_a_lifetime_a_partition_rests_after_a_pass_until_its_earliest_expiry(tmp_path):
    t = committed_table(tmp_path, {"a": 50, "b": 30})
    looked_at: list[int] = []
    sweep = Sweep(t.table, looking(looked_at), every=1, keys_per_event=10, lifetime=100)
    with inside_event(2):
        assert sweep(10) == 0  # one pass over the whole table: nothing expires before 30
    assert sorted(looked_at) == [30, 50]
    for offset, clock in enumerate([11, 20, 30], start=3):
        with inside_event(offset):
            assert sweep(clock) == 0
    assert len(looked_at) == 2  # rested
    with inside_event(6):
        assert sweep(30.1) == 1  # past the earliest expiry: looked again, and deleted
    assert "b" not in t.table and t.table["a"] == 50


def test_with_a_lifetime_a_rest_ends_a_lifetime_after_its_pass_began_for_what_was_written_since(tmp_path):
    t = committed_table(tmp_path, {"a": 500})
    looked_at: list[int] = []
    sweep = Sweep(t.table, looking(looked_at), every=1, keys_per_event=10, lifetime=100)
    with inside_event(2):
        sweep(10)  # a pass beginning at 10: whatever is written from now on expires at 110 or later
    with inside_event(3):
        t.table["new"] = 110
    t.commit(checkpoint=3)
    with inside_event(4):
        assert sweep(110) == 0 and looked_at == [500]
    with inside_event(5):
        assert sweep(110.1) == 1
    assert "new" not in t.table and t.table["a"] == 500


def test_with_a_lifetime_writes_not_committed_when_a_pass_begins_bound_its_rest(tmp_path):
    t = committed_table(tmp_path, {"a": 500})
    with inside_event(2):
        t.table["uncommitted"] = 40  # written before the pass, committed after it went by
    looked_at: list[int] = []
    sweep = Sweep(t.table, looking(looked_at), every=1, keys_per_event=10, lifetime=100)
    with inside_event(3):
        sweep(10)
    t.commit(checkpoint=3)
    with inside_event(4):
        assert sweep(40) == 0
    with inside_event(5):
        assert sweep(40.1) == 1
    assert "uncommitted" not in t.table


def test_without_a_lifetime_every_sweep_looks(tmp_path):
    t = committed_table(tmp_path, {"a": 50})
    looked_at: list[int] = []
    sweep = Sweep(t.table, looking(looked_at), every=1, keys_per_event=10)
    for offset in range(2, 5):
        with inside_event(offset):
            sweep(10)
    assert looked_at == [50, 50, 50]
