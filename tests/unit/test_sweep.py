"""The sweep: a table's expired entries deleted inside the events of their partition, a few per event.

A real eos-rocksdb store, no broker (:mod:`store_support`).
"""
from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from faust_eos import StoreRefused
from faust_eos.sweep import Sweep
from store_support import PARTITION, Table, event_loop_for_faust, inside_event  # noqa: F401 (an autouse fixture)


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
    sweep = Sweep(t.table, lambda value: value < 10, every=1, keys_per_event=10)
    swept_before = swept("totals")
    with inside_event(2):
        assert sweep() == 2
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
    sweep = Sweep(t.table, lambda value: looked_at.append(value) or True, every=1)
    with inside_event(3):
        assert sweep() == 0 and t.table["a"] == 2
    assert looked_at == []


def test_a_sweep_runs_every_n_events_of_a_partition_and_its_cursor_covers_the_table_then_wraps(tmp_path):
    t = committed_table(tmp_path, {f"k{i}": i for i in range(10)})
    looked_at: list[int] = []
    sweep = Sweep(t.table, lambda value: looked_at.append(value) and False, every=2, keys_per_event=2)
    keys = list(range(10))  # the values of k0..k9, in key order
    for offset in range(2, 12):  # 10 events: 5 sweeps of up to 4 entries each (the store's own keys count too)
        with inside_event(offset):
            sweep()
    assert looked_at[:10] == keys  # one pass over the table, in key order
    assert 0 < len(looked_at) - 10 < 10 and looked_at[10:] == keys[:len(looked_at) - 10]  # then from the start
    swept = len(looked_at)
    with inside_event(20, partition=PARTITION + 1):
        sweep()  # the first event of another partition: that partition counts its own events
    assert len(looked_at) == swept


def test_a_sweep_outside_an_event_is_refused(tmp_path):
    t = committed_table(tmp_path, {"a": 1})
    with pytest.raises(RuntimeError, match="inside an event"):
        Sweep(t.table, lambda value: True)()


def test_a_sweep_that_never_runs_is_refused(tmp_path):
    t = Table(tmp_path)
    with pytest.raises(ValueError, match="at least 1"):
        Sweep(t.table, lambda value: True, every=0)


def test_a_table_that_writes_other_partitions_than_its_events_cannot_be_swept(tmp_path):
    t = Table(tmp_path)
    t.table.use_partitioner = True
    with pytest.raises(StoreRefused, match="use_partitioner"):
        Sweep(t.table, lambda value: True)


def test_a_predicate_that_takes_no_value_is_refused_at_once(tmp_path):
    t = Table(tmp_path)
    with pytest.raises(ValueError, match="must take the value of an entry"):
        Sweep(t.table, lambda: True)


def test_what_the_sweep_is_called_with_follows_each_value_into_the_predicate(tmp_path):
    t = committed_table(tmp_path, {"early": 5, "late": 50})
    looked_at = []
    sweep = Sweep(t.table, lambda value, now: looked_at.append((value, now)) or value < now, every=1,
                  keys_per_event=10)
    with inside_event(2):
        assert sweep(10) == 1
        assert "early" not in t.table and t.table["late"] == 50
    assert sorted(looked_at) == [(5, 10), (50, 10)]
