"""A commit round against fake transactions: what commits and resolves, and what is given up."""
from __future__ import annotations

import asyncio
from typing import Optional

import pytest
from prometheus_client import REGISTRY

from fakes import FakeTables, FakeTransaction
from faust_eos.commit import PartitionCommits
from faust_eos.errors import LocalStateNotWritten
from faust_eos.staging import SourceTP, StagedRecord, Staging
from faust_eos.transaction import ProducerFenced, TransactionFailed, TransactionStuck

A, B = SourceTP("payments", 0), SourceTP("payments", 1)
CHANGELOG = "app-counts-changelog"


class Round:
    """A PartitionCommits over real staging, with the callbacks it fires recorded."""

    def __init__(self, **transactions: FakeTransaction) -> None:
        self.staging = Staging()
        self.transactions = {SourceTP("payments", int(name[1:])): t for name, t in transactions.items()}
        self.rejoins = 0
        self.resolved: list[tuple[bytes, str]] = []
        self.tables = FakeTables(CHANGELOG)
        self.commits = PartitionCommits(self.staging, self.transactions, self.tables, self._rejoin)

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


def test_a_committed_transaction_resolves_its_records_in_order():
    a = FakeTransaction()
    round_ = Round(p0=a)
    round_.stage(A, 3, b"x")
    round_.stage(A, 4, b"y")
    round_.stage(A, 9, b"later")
    assert round_.run({A: 5}) == {A: True}
    assert a.commits == [([b"x", b"y"], 5)]
    assert round_.resolved == [(b"x", "md-x"), (b"y", "md-y")]
    assert round_.staged(A) == [b"later"]
    assert round_.rejoins == 0


FAILURES = [TransactionFailed("aborted"), ProducerFenced("claimed elsewhere"), TransactionStuck("no answer")]
FAILURE_IDS = ["failed", "fenced", "stuck"]


@pytest.mark.parametrize("failure", FAILURES, ids=FAILURE_IDS)
def test_a_transaction_that_did_not_commit_gives_the_partition_up(failure):
    # Never a retry on a new producer claiming the id: a zombie's failed transaction would fence the new owner.
    a = FakeTransaction(failure)
    round_ = Round(p0=a)
    round_.stage(A, 3, b"x")
    round_.stage(A, 8, b"not in this transaction")
    fenced_before, given_up_before = fenced_count(), given_up_count()
    assert round_.run({A: 4}) == {A: False}
    assert round_.staged(A) == [] and round_.resolved == []
    assert a.closed and A not in round_.transactions
    assert round_.rejoins == 1 and given_up_count() - given_up_before == 1
    assert fenced_count() - fenced_before == (1 if isinstance(failure, ProducerFenced) else 0)
    assert round_.run({}) == {}  # nothing is retried
    assert a.commits == [([b"x"], 4)]


def test_a_partition_without_producer_drops_its_records_without_rejoining():
    round_ = Round()
    round_.stage(A, 3, b"x")
    assert round_.run({A: 4}) == {A: False}
    assert round_.staged(A) == [] and round_.rejoins == 0


def test_a_commit_sends_the_outputs_then_the_newest_write_of_each_table_key_and_stores_them_after_the_commit():
    a = FakeTransaction()
    round_ = Round(p0=a)
    round_.stage(A, 1, b"k=1", table_key=b"k")
    round_.stage(A, 1, b"out-1")
    round_.stage(A, 2, b"j=1", table_key=b"j")
    round_.stage(A, 2, b"k=2", table_key=b"k")
    round_.stage(A, 9, b"k=3", table_key=b"k")  # an event not yet committed
    assert round_.run({A: 3}) == {A: True}
    assert a.commits == [([b"out-1", b"k=2", b"j=1"], 3)]
    assert round_.tables.stored == [(b"k=2", "md-k=2"), (b"j=1", "md-j=1")]
    assert round_.resolved == [(b"out-1", "md-out-1")]
    assert round_.tables.changelog_records({A: 100})[0].value == b"k=3"


def test_partitions_of_one_round_succeed_or_fail_on_their_own():
    a, b = FakeTransaction(TransactionFailed("aborted")), FakeTransaction()
    round_ = Round(p0=a, p1=b)
    round_.stage(A, 1, b"a")
    round_.stage(B, 1, b"b")
    assert round_.run({A: 2, B: 2}) == {A: False, B: True}
    assert round_.resolved == [(b"b", "md-b")]
    assert A not in round_.transactions and B in round_.transactions


def test_a_committed_transaction_whose_table_writes_cannot_be_stored_stops_the_worker():
    round_ = Round(p0=FakeTransaction())
    round_.stage(A, 1, b"k=1", table_key=b"k")

    def disk_failed(records, metadata) -> None:
        raise OSError("No space left on device")

    round_.tables.committed = disk_failed
    with pytest.raises(LocalStateNotWritten, match="restores them from the changelogs"):
        round_.run({A: 2})
    assert round_.resolved == []  # the worker stops before anything more happens


class EndsWith(FakeTransaction):
    """A transaction whose commit first does ``during`` (e.g. what a rebalance does meanwhile), then raises."""

    def __init__(self, failure: BaseException, during=lambda: None) -> None:
        super().__init__()
        self.failure, self.during = failure, during

    async def commit(self, records, offset):
        self.commits.append(([record.value for record in records], offset))
        self.during()
        await asyncio.sleep(0)
        raise self.failure


@pytest.mark.parametrize("failure", [RuntimeError("a bug"), asyncio.CancelledError()], ids=["error", "cancelled"])
def test_a_commit_ended_any_other_way_gives_the_partition_up_with_its_table_writes(failure):
    a = EndsWith(failure)
    round_ = Round(p0=a)
    round_.stage(A, 1, b"k=1", table_key=b"k")
    round_.stage(A, 1, b"out-1")
    with pytest.raises(type(failure)):
        round_.run({A: 2})
    # had the output gone back while the write stayed, the next commit would carry k=1 without out-1
    assert round_.staged(A) == [] and round_.tables.changelog_records({A: 100}) == []
    assert round_.tables.released == [b"k=1"]
    assert a.closed and A not in round_.transactions and round_.rejoins == 1


def test_a_commit_that_fails_after_its_partition_was_revoked_meanwhile_closes_no_newer_producer():
    round_ = Round()
    a = EndsWith(TransactionFailed("aborted"), during=lambda: round_.transactions.update({A: newer}))
    newer = FakeTransaction()  # the partition revoked and claimed again while the commit ran
    round_.transactions[A] = a
    round_.stage(A, 1, b"out-1")
    assert round_.run({A: 2}) == {A: False}
    assert not newer.closed and round_.transactions[A] is newer
