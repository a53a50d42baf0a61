"""A commit round against a fake producer: what commits and resolves, and what is given up."""
from __future__ import annotations

import asyncio
from typing import Optional

import pytest
from fakes import FakeTables, FakeTransaction
from prometheus_client import REGISTRY

from faust_eos.committing.commit import WorkerCommits
from faust_eos.committing.transaction import ProducerFenced, TransactionFailed, TransactionStuck
from faust_eos.errors import LocalStateNotWritten
from faust_eos.state.staging import SourceTP, StagedRecord, Staging

A, B = SourceTP("payments", 0), SourceTP("payments", 1)
CHANGELOG = "app-counts-changelog"
MEMBER = b"the group's generation and member id"


class Round:
    """WorkerCommits over real staging, owning ``owned``, with the producers it made and the callbacks it fired."""

    def __init__(self, *producers: FakeTransaction, owned=(A,), member: Optional[bytes] = MEMBER,
                 claim: bool = True) -> None:
        self.staging = Staging()
        self.to_make = list(producers) or [FakeTransaction()]
        self.made: list[FakeTransaction] = []
        self.member = member
        self.rejoins = 0
        self.resolved: list[tuple[bytes, str]] = []
        self.tables = FakeTables(CHANGELOG)
        self.commits = WorkerCommits(self.staging, self.tables, self._new_producer, lambda: self.member,
                                     self._rejoin)
        self.commits.owned.update(owned)
        if claim:
            assert asyncio.run(self.commits.claim())

    @property
    def producer(self) -> FakeTransaction:
        return self.made[-1]

    def _new_producer(self) -> FakeTransaction:
        self.made.append(self.to_make.pop(0))
        return self.made[-1]

    def _rejoin(self) -> None:
        self.rejoins += 1

    def stage(self, tp: SourceTP, offset: int, value: bytes, *, table_key: Optional[bytes] = None) -> None:
        """Stage an output record, or with ``table_key`` write that key of a table."""
        if table_key is not None:
            self.tables.write(tp, offset, table_key, value)
            return

        def resolve(md: str) -> None:
            self.resolved.append((value, md))

        record = StagedRecord(topic="out", key=None, value=value, partition=tp.partition, timestamp_ms=None,
                              headers=None, source_offset=offset, on_committed=resolve)
        self.staging.add_at(SourceTP(tp.topic, tp.partition), record)

    def run(self, offsets: dict[SourceTP, int]) -> dict[SourceTP, bool]:
        return asyncio.run(self.commits.run(offsets))

    def staged(self, tp: SourceTP) -> list[bytes]:
        return [record.value for record in self.staging.take(tp, 1 << 62)]


def fenced_count() -> float:
    return REGISTRY.get_sample_value("faust_eos_producers_fenced_total") or 0.0


def given_up_count() -> float:
    return REGISTRY.get_sample_value("faust_eos_partitions_given_up_total") or 0.0


def test_a_committed_round_resolves_its_records_in_order():
    round_ = Round()
    round_.stage(A, 3, b"x")
    round_.stage(A, 4, b"y")
    round_.stage(A, 9, b"later")
    assert round_.run({A: 5}) == {A: True}
    assert round_.producer.commits == [([b"x", b"y"], {A: 5}, MEMBER)]
    assert round_.resolved == [(b"x", "md-x"), (b"y", "md-y")]
    assert round_.staged(A) == [b"later"]
    assert round_.rejoins == 0


def test_every_owned_partition_commits_in_one_transaction_with_the_member():
    round_ = Round(owned=(A, B))
    round_.stage(A, 1, b"a")
    round_.stage(B, 7, b"b")
    assert round_.run({A: 2, B: 8}) == {A: True, B: True}
    assert round_.producer.commits == [([b"a", b"b"], {A: 2, B: 8}, MEMBER)]
    assert round_.resolved == [(b"a", "md-a"), (b"b", "md-b")]


FAILURES = [TransactionFailed("aborted"), ProducerFenced("claimed elsewhere"), TransactionStuck("no answer")]
FAILURE_IDS = ["failed", "fenced", "stuck"]


@pytest.mark.parametrize("failure", FAILURES, ids=FAILURE_IDS)
def test_a_round_that_did_not_commit_gives_every_partition_of_it_up_with_the_producer(failure):
    round_ = Round(FakeTransaction(failure), owned=(A, B))
    round_.stage(A, 3, b"x")
    round_.stage(A, 8, b"not in this transaction")
    round_.stage(B, 1, b"y")
    fenced_before, given_up_before = fenced_count(), given_up_count()
    assert round_.run({A: 4, B: 2}) == {A: False, B: False}
    assert round_.staged(A) == [] and round_.staged(B) == [] and round_.resolved == []
    assert round_.producer.closed and round_.commits.owned == set()
    assert round_.rejoins == 1 and given_up_count() - given_up_before == 2
    assert fenced_count() - fenced_before == (1 if isinstance(failure, ProducerFenced) else 0)
    # until they are assigned again, the partitions commit nothing more
    round_.stage(A, 9, b"processed meanwhile")
    assert round_.run({A: 10}) == {A: False}
    assert round_.staged(A) == [] and len(round_.producer.commits) == 1


def test_the_next_claim_after_a_failed_round_is_a_new_producer_of_the_id():
    round_ = Round(FakeTransaction(TransactionFailed("aborted")), FakeTransaction())
    round_.stage(A, 1, b"x")
    assert round_.run({A: 2}) == {A: False}
    assert asyncio.run(round_.commits.claim())
    assert len(round_.made) == 2 and round_.made[1].claimed and not round_.made[1].closed


def test_a_claim_is_made_once_while_its_producer_holds_the_id():
    round_ = Round()
    assert asyncio.run(round_.commits.claim())
    assert len(round_.made) == 1


def test_a_claim_that_fails_leaves_nothing_able_to_commit():
    round_ = Round(FakeTransaction(claim_fails=True), claim=False)
    assert not asyncio.run(round_.commits.claim())
    assert round_.made[0].closed
    round_.stage(A, 1, b"x")
    assert round_.run({A: 2}) == {A: False}
    assert round_.staged(A) == [] and round_.made[0].commits == [] and round_.rejoins == 1


def test_a_claim_cancelled_midway_closes_its_producer():
    class Cancelled(FakeTransaction):
        async def init(self) -> None:
            raise asyncio.CancelledError()

    round_ = Round(Cancelled(), claim=False)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(round_.commits.claim())
    assert round_.made[0].closed


def test_a_round_while_the_worker_is_out_of_the_group_commits_nothing_and_gives_everything_up():
    # the broker takes offsets sent without a generation from anyone: a zombie's would go through
    round_ = Round(member=None, owned=(A, B))
    round_.stage(A, 1, b"x")
    round_.stage(B, 1, b"y", table_key=b"k")
    assert round_.run({A: 2, B: 2}) == {A: False, B: False}
    assert round_.producer.commits == []
    assert round_.staged(A) == [] and round_.tables.changelog_records({B: 100}) == []
    assert round_.commits.owned == set() and round_.rejoins == 1


def test_a_partition_not_owned_drops_its_records_without_rejoining():
    round_ = Round(owned=())
    round_.stage(A, 3, b"x")
    assert round_.run({A: 4}) == {A: False}
    assert round_.staged(A) == [] and round_.rejoins == 0 and round_.producer.commits == []


def test_a_commit_sends_the_outputs_then_the_newest_write_of_each_table_key_and_stores_them_after_the_commit():
    round_ = Round()
    round_.stage(A, 1, b"k=1", table_key=b"k")
    round_.stage(A, 1, b"out-1")
    round_.stage(A, 2, b"j=1", table_key=b"j")
    round_.stage(A, 2, b"k=2", table_key=b"k")
    round_.stage(A, 9, b"k=3", table_key=b"k")  # an event not yet committed
    assert round_.run({A: 3}) == {A: True}
    assert round_.producer.commits == [([b"out-1", b"k=2", b"j=1"], {A: 3}, MEMBER)]
    assert round_.tables.stored == [(b"k=2", "md-k=2"), (b"j=1", "md-j=1")]
    assert round_.resolved == [(b"out-1", "md-out-1")]
    assert round_.tables.changelog_records({A: 100})[0].value == b"k=3"


def test_a_committed_round_whose_table_writes_cannot_be_stored_stops_the_worker():
    round_ = Round()
    round_.stage(A, 1, b"k=1", table_key=b"k")

    def disk_failed(records, metadata) -> None:
        raise OSError("No space left on device")

    round_.tables.committed = disk_failed
    with pytest.raises(LocalStateNotWritten, match="restores them from the changelogs"):
        round_.run({A: 2})
    assert round_.resolved == []  # the worker stops before anything more happens


class EndsWith(FakeTransaction):
    """A producer whose commit raises ``failure`` after yielding to the event loop."""

    def __init__(self, failure: BaseException) -> None:
        super().__init__()
        self.failure = failure

    async def commit(self, records, offsets=None, group=None):
        self.commits.append(([record.value for record in records], dict(offsets or {}), group))
        await asyncio.sleep(0)
        raise self.failure


@pytest.mark.parametrize("failure", [RuntimeError("a bug"), asyncio.CancelledError()], ids=["error", "cancelled"])
def test_a_commit_ended_any_other_way_gives_the_partitions_up_with_their_table_writes(failure):
    round_ = Round(EndsWith(failure))
    round_.stage(A, 1, b"k=1", table_key=b"k")
    round_.stage(A, 1, b"out-1")
    with pytest.raises(type(failure)):
        round_.run({A: 2})
    # had the output gone back while the write stayed, the next commit would carry k=1 without out-1
    assert round_.staged(A) == [] and round_.tables.changelog_records({A: 100}) == []
    assert round_.tables.released == [b"k=1"]
    assert round_.producer.closed and A not in round_.commits.owned and round_.rejoins == 1
