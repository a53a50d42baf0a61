"""Staging: records wait for the transaction of the input partition that caused them."""
import asyncio

import pytest

from app.eos.staging import Source, SourceTP, StagedRecord, Staging, future_callbacks

TP0 = SourceTP("payments", 0)
TP1 = SourceTP("payments", 1)


def record(offset, name=None, on_discarded=None):
    extra = {"on_discarded": on_discarded} if on_discarded else {}
    return StagedRecord(topic="out", key=None, value=(name or f"r{offset}").encode(), partition=None,
                        timestamp_ms=None, headers=None, source_offset=offset, **extra)


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


def test_discard_reports_the_reason_to_every_record_and_returns_partitions_that_had_records():
    staging = Staging()
    calls = []
    stage(staging, TP0, record(1, on_discarded=lambda exc: calls.append(("r1", exc))),
          record(2, on_discarded=lambda exc: calls.append(("r2", exc))))
    reason = RuntimeError("fenced")
    assert staging.discard([TP0, TP1], reason) == {TP0}
    assert calls == [("r1", reason), ("r2", reason)]
    assert len(staging) == 0 and staging.pending() == set()


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


def test_future_callbacks_commit_settles_the_future_once():
    async def scenario():
        future = asyncio.get_running_loop().create_future()
        committed, discarded = future_callbacks(future)
        committed("metadata")
        committed("later")
        discarded(RuntimeError("too late"))
        return await future

    assert asyncio.run(scenario()) == "metadata"


def test_future_callbacks_discard_fails_the_future_once():
    async def scenario():
        future = asyncio.get_running_loop().create_future()
        committed, discarded = future_callbacks(future)
        discarded(RuntimeError("aborted"))
        committed("too late")
        discarded(RuntimeError("again"))
        return await future

    with pytest.raises(RuntimeError, match="aborted"):
        asyncio.run(scenario())
