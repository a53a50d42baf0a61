"""``/commits/`` counts the commit rounds that really committed, under both guarantees."""
from __future__ import annotations

import asyncio

import faust
import pytest
from fakes import FakeTransaction
from faust.types import TP

from app.commit_timer import CommitTimer
from faust_eos.committing.transaction import TransactionFailed
from faust_eos.faust_internals import ConsumerHooks, committed_offsets
from faust_eos.state.staging import SourceTP

SOURCES = {TP("payments", 0): 5, TP("payments", 1): 7}


@pytest.fixture
def consumer():
    return faust.App("commit-timer-test", broker="eos://localhost:9092", processing_guarantee="at_least_once").consumer


def timed_round(timer: CommitTimer, consumer, commit) -> None:
    state = timer.on_commit_initiated(consumer)
    commit()
    timer.on_commit_completed(consumer, state)


def offset_commit_answering(monkeypatch, accepted: bool) -> None:
    async def group_answers(self, offsets) -> bool:
        return accepted

    monkeypatch.setattr(ConsumerHooks, "commit_to_group", group_answers)


def test_an_offset_commit_the_group_accepted_is_a_round_of_its_partitions(consumer, monkeypatch):
    timer = CommitTimer()
    offset_commit_answering(monkeypatch, accepted=True)
    timed_round(timer, consumer, lambda: asyncio.run(consumer.commit_to_group(SOURCES)))
    assert [partitions for _end, _duration, partitions in timer.rounds] == [2]


def test_an_offset_commit_that_failed_is_no_round(consumer, monkeypatch):
    timer = CommitTimer()
    offset_commit_answering(monkeypatch, accepted=False)
    timed_round(timer, consumer, lambda: asyncio.run(consumer.commit_to_group(SOURCES)))
    assert list(timer.rounds) == []


def test_a_round_counts_the_partitions_its_transaction_committed(monkeypatch):
    consumer = faust.App("commit-timer-test", broker="eos://localhost:9092",
                         processing_guarantee="exactly_once").consumer
    monkeypatch.setattr(consumer, "request_rejoin", lambda: None)  # asked by the round given up
    commits = consumer.transactions._commits
    producers = [FakeTransaction(None, TransactionFailed("aborted"))]
    monkeypatch.setattr(commits, "_new_producer", producers.pop)
    monkeypatch.setattr(commits, "_member", lambda: b"the committing member")
    assert asyncio.run(commits.claim())
    commits.owned.update(SourceTP(tp.topic, tp.partition) for tp in SOURCES)
    timer = CommitTimer()
    timed_round(timer, consumer, lambda: asyncio.run(consumer.transactions.commit(SOURCES)))
    timed_round(timer, consumer, lambda: asyncio.run(consumer.transactions.commit(SOURCES)))  # aborted
    timed_round(timer, consumer, lambda: asyncio.run(consumer.transactions.commit({})))  # nothing left to commit
    assert [partitions for _end, _duration, partitions in timer.rounds] == [2]


def test_faust_records_a_failed_offset_commit_as_committed_but_it_is_not_counted(consumer, monkeypatch):
    # why the offsets Faust records cannot tell a round that committed
    offset_commit_answering(monkeypatch, accepted=False)
    monkeypatch.setattr(consumer, "assignment", lambda: set(SOURCES))
    assert asyncio.run(consumer._commit_offsets(SOURCES)) is False
    assert {tp: committed_offsets(consumer)[tp] for tp in SOURCES} == SOURCES
    assert consumer.partitions_committed == 0
