"""The eos-rocksdb store: table writes kept until their commit, committed state in RocksDB with its checkpoint.

A real RocksDB in a temporary directory, no broker. Table writes go through
Faust's own table as an agent makes them; the test stands in for faust-eos's
producer, handing each changelog record to the tables as the transaction
manager does.
"""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from faust.types import TP
from faust_contract_support import worker_app
from prometheus_client import REGISTRY
from store_support import PARTITION, Table, event_loop_for_faust, inside_event  # noqa: F401 (an autouse fixture)

from faust_eos import StoreRefused
from faust_eos.state.store import CHECKPOINT_KEY, PARTITIONS_KEY


def test_a_write_is_read_at_once_but_reaches_rocksdb_only_with_its_commit_and_checkpoint(tmp_path):
    t = Table(tmp_path)
    with inside_event(10):
        t.table["m1"] = 5
        assert t.table["m1"] == 5 and "m1" in t.table
    assert t.on_disk("m1") is None and t.store.held() == 1
    t.commit(checkpoint=41)
    assert t.on_disk("m1") is not None and t.store.held() == 0
    assert t.store.partition_db(PARTITION).get(CHECKPOINT_KEY) == b"41"
    assert t.table.persisted_offset(TP(t.table.changelog_topic.get_topic_name(), PARTITION)) == 41
    with inside_event(11):
        assert t.table["m1"] == 5


def test_writes_dropped_without_commit_leave_the_last_committed_state(tmp_path):
    t = Table(tmp_path)
    with inside_event(10):
        t.table["m1"] = 5
    t.commit(checkpoint=3)
    with inside_event(11):
        t.table["m1"] = 6
        t.table["m2"] = 1
    t.drop()
    with inside_event(12):
        assert t.table["m1"] == 5 and "m2" not in t.table
    assert t.store.held() == 0


def test_a_later_write_of_a_key_stays_held_when_an_earlier_one_commits(tmp_path):
    t = Table(tmp_path)
    with inside_event(10):
        t.table["m1"] = 5
    with inside_event(11):
        t.table["m1"] = 6
    t.commit(checkpoint=7, up_to=11)  # the event at 11 is not done yet: the commit reaches event 10's write
    assert t.on_disk("m1") == b"5"
    with inside_event(12):
        assert t.table["m1"] == 6
    assert t.store.held() == 1
    t.commit(checkpoint=8)
    assert t.on_disk("m1") == b"6" and t.store.held() == 0


def test_a_delete_hides_the_key_at_once_and_removes_it_from_rocksdb_with_its_commit(tmp_path):
    t = Table(tmp_path)
    with inside_event(10):
        t.table["m1"] = 5
    t.commit(checkpoint=1)
    with inside_event(11):
        del t.table["m1"]
        assert "m1" not in t.table
    assert t.on_disk("m1") is not None
    t.commit(checkpoint=2)
    assert t.on_disk("m1") is None


def test_iterating_a_table_shows_committed_and_held_keys_but_not_the_stores_own(tmp_path):
    t = Table(tmp_path)
    t.store.changelog_partitions = 4
    with inside_event(10):
        t.table["m1"] = 1
        t.table["m2"] = 2
    t.commit(checkpoint=5)
    with inside_event(11):
        t.table["m3"] = 3
        del t.table["m1"]
    t.table.app.assignor.assigned_actives = lambda: {TP(t.table.changelog_topic.get_topic_name(), PARTITION)}
    assert dict(t.table.items()) == {"m2": 2, "m3": 3}
    assert len(t.table) == 2
    assert t.store.partition_db(PARTITION).get(PARTITIONS_KEY) == b"4"


def test_a_write_whose_changelog_record_never_reached_faust_eos_is_refused(tmp_path):
    t = Table(tmp_path, hold=False)
    with inside_event(10), pytest.raises(StoreRefused, match="needs the app's broker to be eos://"):
        t.table["m1"] = 5


def restored(tmp_path, checkpoint: int) -> Table:
    """A table whose partition holds "m1" restored up to changelog offset ``checkpoint``."""
    t = Table(tmp_path)
    with inside_event(0):
        t.table["m1"] = 5
    t.commit(checkpoint)
    return t


def test_local_state_within_its_changelog_is_trusted(tmp_path):
    t = restored(tmp_path, 9)
    assert t.store.untrusted(PARTITION, changelog_start=0, changelog_end=10) is None
    assert t.store.untrusted(PARTITION, changelog_start=10, changelog_end=12) is None  # the next record is there
    assert t.store.untrusted(PARTITION + 1, changelog_start=0, changelog_end=0) is None  # nothing local yet


@pytest.mark.parametrize("start, end, partitions, why", [
    (0, 9, None, "its checkpoint 9 is past the changelog's last committed record (8)"),
    (11, 20, None, "the changelog now starts at 11, past its checkpoint 9: records between are gone"),
    (0, 20, 8, "it was written when the changelog had 4 partitions, now 8"),
])
def test_local_state_the_changelog_contradicts_is_untrusted_with_the_reason(tmp_path, start, end, partitions, why):
    t = Table(tmp_path)
    t.store.changelog_partitions = 4
    with inside_event(0):
        t.table["m1"] = 5
    t.commit(9)
    t.store.changelog_partitions = partitions or 4
    assert t.store.untrusted(PARTITION, changelog_start=start, changelog_end=end) == why


def test_keys_without_a_checkpoint_are_untrusted(tmp_path):
    t = Table(tmp_path)
    t.store.partition_db(PARTITION).put(t.store._encode_key("m1"), b"5")  # as an older release left it
    assert t.store.untrusted(PARTITION, changelog_start=0, changelog_end=10) == "it holds keys but no checkpoint"


def test_a_corrupt_database_is_untrusted_and_rebuilding_deletes_it(tmp_path):
    t = restored(tmp_path, 9)
    t.store.rebuild(PARTITION, "test")  # closed and deleted
    path = t.store.partition_path(PARTITION)
    path.mkdir(parents=True)
    (path / "CURRENT").write_text("MANIFEST-nonexistent\n")
    why = t.store.untrusted(PARTITION, changelog_start=0, changelog_end=10)
    assert why is not None and why.startswith("its database cannot be opened")
    t.store.rebuild(PARTITION, why)
    assert not path.exists()
    assert t.store.untrusted(PARTITION, changelog_start=0, changelog_end=10) is None


def test_only_the_store_writes_checkpoints_a_restore_batch_ends_with_the_last_offset_it_applied(tmp_path):
    t = restored(tmp_path, 9)
    changelog = t.table.changelog_topic.get_topic_name()
    t.store.set_persisted_offset(TP(changelog, PARTITION), 3)  # Faust, for a record sent earlier: ignored
    assert t.table.persisted_offset(TP(changelog, PARTITION)) == 9
    records = [SimpleNamespace(message=SimpleNamespace(tp=TP(changelog, PARTITION), partition=PARTITION, offset=o,
                                                       key=t.store._encode_key(f"r{o}"), value=b"1"))
               for o in (12, 11)]
    t.store.apply_changelog_batch(records, None, None)
    assert t.table.persisted_offset(TP(changelog, PARTITION)) == 12
    assert t.on_disk("r11") == b"1"


def test_a_checkpoint_written_by_faust_s_own_store_or_an_older_release_is_untrusted(tmp_path):
    t = Table(tmp_path)
    db = t.store.partition_db(PARTITION)
    db.put(t.store._encode_key("m1"), b"5")
    db.put(CHECKPOINT_KEY, b"3")  # as rocksdb:// leaves it, with writes that may never have committed
    assert t.store.untrusted(PARTITION, changelog_start=0, changelog_end=10) == (
        "its checkpoint was written by a store that also wrote uncommitted state")


def test_every_partition_has_its_restore_series_at_zero_before_any_restore(tmp_path):
    # rate() cannot see the first count of a series that appears already counting
    name = f"fresh-{uuid.uuid4().hex[:6]}"
    table = worker_app(store="eos-rocksdb://", tabledir=tmp_path).Table(name, default=None, partitions=3)
    assert table.data is not None  # the store is made on first use
    values = [REGISTRY.get_sample_value("faust_eos_changelog_records_restored_total",
                                        {"table": name, "partition": str(partition), "kind": "active"})
              for partition in range(4)]
    assert values == [0.0, 0.0, 0.0, None]
