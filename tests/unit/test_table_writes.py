"""Which table writes exactly-once can commit: each table partition is written from one input partition."""
from __future__ import annotations

import faust
import pytest
from aiokafka.structs import RecordMetadata, TopicPartition
from store_support import PARTITION, Table, event_loop_for_faust  # noqa: F401 (an autouse fixture)

from faust_eos import StoreRefused
from faust_eos.committing.produce import reported_indexes
from faust_eos.state.staging import SourceTP, staged_record
from faust_eos.state.table_state import TableState


def _metadata(topic: str, partition: int, offset: int) -> RecordMetadata:
    return RecordMetadata(topic, partition, TopicPartition(topic, partition), offset, 0, 0, -1)


def write_from(t: Table, tables: TableState, source: SourceTP, offset: int) -> None:
    """A write of key k to table partition 2 by the event at ``offset`` of ``source``."""
    tables.hold(staged_record(t.table.changelog_topic.get_topic_name(), b"k", b"v", PARTITION, None, None, offset),
                source)


def test_under_exactly_once_a_table_partition_written_from_a_second_input_partition_is_refused(tmp_path):
    t = Table(tmp_path)
    write_from(t, t.tables, SourceTP("orders", 2), 1)
    write_from(t, t.tables, SourceTP("orders", 2), 2)  # the same input partition again: fine
    with pytest.raises(StoreRefused, match=r"contract-totals-changelog\[2\] is written by events of orders\[2\] "
                                           r"and of refunds\[2\]"):
        write_from(t, t.tables, SourceTP("refunds", 2), 3)
    assert t.store.held() == 2


def test_under_at_least_once_a_table_partition_may_be_written_from_two_input_partitions(tmp_path):
    t = Table(tmp_path)
    tables = TableState([t.table])
    write_from(t, tables, SourceTP("orders", 2), 1)
    write_from(t, tables, SourceTP("refunds", 2), 7)
    assert [r.source_offset for r in tables.changelog_records({SourceTP("refunds", 2): 9})] == [7]
    # each input partition's commit carries its own events' newest write
    assert [r.source_offset for r in tables.changelog_records({SourceTP("orders", 2): 9})] == [1]


@pytest.mark.parametrize("options", [{"use_partitioner": True}], ids=["use_partitioner"])
def test_a_table_that_writes_other_partitions_than_its_events_is_refused(tmp_path, options):
    app = faust.App("x", broker="eos://localhost:9092", datadir=str(tmp_path), store="eos-rocksdb://")
    app.Table("routed", default=int, **options)
    with pytest.raises(StoreRefused, match="table 'routed' writes keys to partitions other than its event's"):
        TableState(app.tables.values())


def test_of_a_changelog_partition_only_the_last_record_has_its_delivery_reported_inside_a_transaction(tmp_path):
    t = Table(tmp_path)
    for offset, key in enumerate((b"a", b"b", b"c")):
        t.tables.write(t.store, PARTITION, key, offset, str(offset).encode(), SourceTP("orders", 2), offset)
    records = t.tables.changelog_records({SourceTP("orders", 2): 9})
    assert len(records) == 3 and not any(record.needs_metadata() for record in records)
    assert reported_indexes(records) == {2}  # its offset is the partition's new checkpoint


def test_a_write_by_faust_s_own_table_path_is_told_of_its_commit_without_a_delivery_report_of_its_own(tmp_path):
    # Faust's table waits on its changelog write only to hand the offset to the store, which keeps its checkpoint
    # itself: the last record of the partition is reported for that, the others are not
    t = Table(tmp_path)
    tables = TableState([t.table])
    told = []
    changelog = t.table.changelog_topic.get_topic_name()
    for offset, key in enumerate((b"j", b"k")):
        tables.hold(staged_record(changelog, key, b"v", PARTITION, None, None, offset, told.append),
                    SourceTP("orders", 2))
    records = tables.changelog_records({SourceTP("orders", 2): 9})
    assert not any(record.needs_metadata() for record in records)
    assert reported_indexes(records) == {1}

    tables.committed(records, [_metadata(changelog, PARTITION, -1), _metadata(changelog, PARTITION, 41)])
    assert [(md.topic, md.partition) for md in told] == [(changelog, PARTITION)] * 2
    assert t.store.checkpoint(PARTITION) == 41
