"""A commit round against fake transactions: what is retried, what is given up, what resolves."""
from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from fakes import FakeTransaction
from faust_eos.commit import PartitionCommits
from faust_eos.staging import Source, SourceTP, StagedRecord, Staging
from faust_eos.transaction import ProducerFenced, TransactionFailed, TransactionStuck

A, B = SourceTP("payments", 0), SourceTP("payments", 1)


class Round:
    """A PartitionCommits over real staging, with the callbacks it fires recorded."""

    def __init__(self, **transactions: FakeTransaction) -> None:
        self.staging = Staging()
        self.transactions = {SourceTP("payments", int(name[1:])): t for name, t in transactions.items()}
        self.rejoins = 0
        self.resolved: list[tuple[bytes, str]] = []
        self.commits = PartitionCommits(self.staging, self.transactions, self._rejoin)

    def _rejoin(self) -> None:
        self.rejoins += 1

    def stage(self, tp: SourceTP, offset: int, value: bytes) -> None:
        def resolve(md: str) -> None:
            self.resolved.append((value, md))

        record = StagedRecord(topic="out", key=None, value=value, partition=None, timestamp_ms=None,
                              headers=None, source_offset=offset, on_committed=resolve)
        self.staging.add(Source(tp.topic, tp.partition, offset), record)

    def run(self, offsets: dict[SourceTP, int]) -> dict[SourceTP, bool]:
        return asyncio.run(self.commits.run(offsets))

    def staged(self, tp: SourceTP) -> list[bytes]:
        return [record.value for record in self.staging.take(tp, 1 << 62)]


def fenced_count() -> float:
    return REGISTRY.get_sample_value("faust_eos_producers_fenced_total") or 0.0


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
    assert round_.commits.settled() and round_.rejoins == 0


def test_a_failed_transaction_puts_its_records_back_and_is_retried_at_the_next_round():
    a = FakeTransaction(TransactionFailed("aborted"))
    round_ = Round(p0=a)
    round_.stage(A, 3, b"x")
    assert round_.run({A: 4}) == {A: False}
    assert round_.resolved == [] and not round_.commits.settled()
    round_.stage(A, 5, b"y")
    assert round_.run({}) == {A: True}  # no new offsets: the failed one is committed again
    assert a.commits == [([b"x"], 4), ([b"x"], 4)]
    assert round_.resolved == [(b"x", "md-x")]
    assert round_.staged(A) == [b"y"]
    assert round_.commits.settled() and round_.rejoins == 0


def test_a_retry_reaches_as_far_as_the_newer_offset():
    a = FakeTransaction(TransactionFailed("aborted"))
    round_ = Round(p0=a)
    round_.stage(A, 3, b"x")
    round_.run({A: 4})
    round_.stage(A, 6, b"y")
    assert round_.run({A: 7}) == {A: True}
    assert a.commits[-1] == ([b"x", b"y"], 7)


@pytest.mark.parametrize("failure", [ProducerFenced("claimed elsewhere"), TransactionStuck("no answer")],
                         ids=["fenced", "stuck"])
def test_a_fenced_or_stuck_transaction_gives_the_partition_up(failure):
    a = FakeTransaction(failure)
    round_ = Round(p0=a)
    round_.stage(A, 3, b"x")
    round_.stage(A, 8, b"not in this transaction")
    fenced_before = fenced_count()
    assert round_.run({A: 4}) == {A: False}
    assert round_.staged(A) == [] and round_.resolved == []
    assert a.closed and A not in round_.transactions
    assert round_.commits.dirty == {0} and round_.rejoins == 1
    assert fenced_count() - fenced_before == (1 if isinstance(failure, ProducerFenced) else 0)
    assert round_.run({}) == {}  # nothing is retried


def test_a_partition_without_producer_drops_its_records_without_rejoining():
    round_ = Round()
    round_.stage(A, 3, b"x")
    assert round_.run({A: 4}) == {A: False}
    assert round_.staged(A) == [] and round_.commits.dirty == {0} and round_.rejoins == 0


def test_giving_up_a_partition_with_nothing_staged_leaves_its_tables_clean():
    round_ = Round(p0=FakeTransaction(TransactionFailed("aborted")))
    round_.run({A: 4})
    round_.commits.give_up(A, "revoked")
    assert round_.commits.settled()


def test_partitions_of_one_round_succeed_or_fail_on_their_own():
    a, b = FakeTransaction(TransactionFailed("aborted")), FakeTransaction()
    round_ = Round(p0=a, p1=b)
    round_.stage(A, 1, b"a")
    round_.stage(B, 1, b"b")
    assert round_.run({A: 2, B: 2}) == {A: False, B: True}
    assert round_.resolved == [(b"b", "md-b")]
    assert round_.staged(A) == [b"a"]
