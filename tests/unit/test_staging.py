"""Staging: output records wait for the transaction of the input partition that caused them."""
from faust_eos.state.staging import SourceTP, StagedRecord, Staging

TP0 = SourceTP("payments", 0)
TP1 = SourceTP("payments", 1)


def record(offset, name=None):
    return StagedRecord(topic="out", key=None, value=(name or f"r{offset}").encode(), partition=None,
                        timestamp_ms=None, headers=None, source_offset=offset)


def stage(staging, tp, *records):
    for r in records:
        staging.add_at(SourceTP(tp.topic, tp.partition), r)


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


def test_a_send_s_offset_is_asked_for_only_once_its_future_is_awaited_or_given_a_callback():
    import asyncio
    from types import SimpleNamespace

    from faust_eos.state.staging import OFFSET_NOT_ASKED, output_stager

    async def scenario() -> None:
        staging = Staging()
        path = SimpleNamespace(event=object(), source=TP0, offset=5)
        stage = output_stager(staging, "out")
        unread, awaited, called_back = (stage(path, b"k", v, None, None) for v in (b"1", b"2", b"3"))
        async def wait() -> None:
            await awaited

        waiter = asyncio.create_task(wait())
        await asyncio.sleep(0)  # the waiter awaits the future
        called_back.add_done_callback(lambda _: None)
        records = staging.take(TP0, 6)
        assert [record.needs_metadata() for record in records] == [False, True, True]
        assert OFFSET_NOT_ASKED == -1
        waiter.cancel()

    asyncio.run(scenario())
