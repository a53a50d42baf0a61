"""Staging: records wait for the transaction of the input partition that caused them."""
from faust_eos.staging import Source, SourceTP, StagedRecord, Staging, last_write_per_key

TP0 = SourceTP("payments", 0)
TP1 = SourceTP("payments", 1)


def record(offset, name=None):
    return StagedRecord(topic="out", key=None, value=(name or f"r{offset}").encode(), partition=None,
                        timestamp_ms=None, headers=None, source_offset=offset)


def stage(staging, tp, *records):
    for r in records:
        staging.add(Source(tp.topic, tp.partition, r.source_offset), r)


def values(records):
    return [r.value.decode() for r in records]


def test_take_returns_only_records_caused_by_offsets_below_the_limit_in_send_order():
    staging = Staging()
    # a later event's record may be sent before a slower, earlier event's
    stage(staging, TP0, record(5), record(3), record(7), record(4, "r4a"), record(6), record(4, "r4b"))
    assert values(staging.take(TP0, 6)) == ["r5", "r3", "r4a", "r4b"]
    assert values(staging.take(TP0, 100)) == ["r7", "r6"]


def test_take_leaves_other_partitions_alone():
    staging = Staging()
    stage(staging, TP0, record(1))
    stage(staging, TP1, record(1))
    assert values(staging.take(TP0, 10)) == ["r1"]
    assert staging.pending() == {TP1}
    assert len(staging) == 1


def test_take_of_an_unknown_partition_returns_nothing():
    assert Staging().take(TP0, 10) == []


def test_put_back_restores_records_ahead_of_newer_ones():
    staging = Staging()
    stage(staging, TP0, record(1), record(2))
    taken = staging.take(TP0, 3)
    stage(staging, TP0, record(3), record(4))
    staging.put_back(TP0, taken)
    assert values(staging.take(TP0, 100)) == ["r1", "r2", "r3", "r4"]


def test_discard_drops_every_record_of_the_partition_and_returns_them():
    staging = Staging()
    stage(staging, TP0, record(1), record(2))
    stage(staging, TP1, record(1))
    assert values(staging.discard(TP0)) == ["r1", "r2"]
    assert staging.discard(TP0) == []
    assert staging.pending() == {TP1} and len(staging) == 1


def test_len_counts_records_staged_and_put_back_and_not_those_taken():
    staging = Staging()
    stage(staging, TP0, record(1), record(2), record(3))
    taken = staging.take(TP0, 3)
    assert len(staging) == 1
    staging.put_back(TP0, taken)
    assert len(staging) == 3


def changelog(offset, key, value=None):
    return StagedRecord(topic="counts-changelog", key=key, value=value, partition=0, timestamp_ms=None,
                        headers=None, source_offset=offset)


def test_last_write_per_key_keeps_every_output_and_the_last_changelog_record_of_each_key():
    out = record(1)
    k1, j1, k2, k_deleted = changelog(1, b"k", b"1"), changelog(1, b"j", b"1"), changelog(2, b"k", b"2"), changelog(3, b"k")
    other_partition = StagedRecord(topic="counts-changelog", key=b"k", value=b"p1", partition=1, timestamp_ms=None,
                                   headers=None, source_offset=2)
    kept, replaced = last_write_per_key([k1, out, j1, k2, other_partition, k_deleted], {"counts-changelog"})
    assert kept == [out, j1, other_partition, k_deleted]
    assert replaced == [(k1, k_deleted), (k2, k_deleted)]


def test_pending_lists_partitions_with_staged_records_only():
    staging = Staging()
    assert staging.pending() == set()
    stage(staging, TP0, record(1))
    stage(staging, TP1, record(1))
    assert staging.pending() == {TP0, TP1}
    staging.take(TP1, 5)
    assert staging.pending() == {TP0}


def test_len_counts_records_across_partitions():
    staging = Staging()
    stage(staging, TP0, record(1), record(2))
    stage(staging, TP1, record(1))
    assert len(staging) == 3
