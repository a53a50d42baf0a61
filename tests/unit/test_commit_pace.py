"""Timer commits start every commit interval, counted from one round's start to the next (faust_eos.consuming.timer).

Driven by a fake clock: a sleep moves it on, and so does each commit, by as
long as that commit is told to take.
"""
from __future__ import annotations

import asyncio

import pytest
from faust_contract_support import worker_app

from faust_eos.consuming import consumer as consumer_module
from faust_eos.consuming.timer import commit_every


class Clock:
    """A fake clock; the timer stops once ``rounds`` commits started."""

    def __init__(self, commit_takes: list[float], rounds: int) -> None:
        self.now = 100.0
        self.started: list[float] = []
        self._takes = commit_takes
        self._rounds = rounds

    async def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds

    async def commit(self) -> None:
        self.started.append(round(self.now, 6))
        self.now += self._takes[len(self.started) - 1]

    def stopped(self) -> bool:
        return len(self.started) >= self._rounds

    def run(self, interval_s: float) -> list[float]:
        asyncio.run(commit_every(interval_s, self.commit, clock=lambda: self.now, sleep=self.sleep,
                                 stopped=self.stopped))
        return self.started


def test_rounds_start_one_interval_apart_however_long_each_takes():
    # Faust's timer would start them at 101, 102.3, 103.6: each round's length added to the period
    assert Clock([0.3, 0.3, 0.3], rounds=3).run(1.0) == [101.0, 102.0, 103.0]


def test_a_round_longer_than_the_interval_is_followed_at_once_then_the_pace_resumes_without_a_burst():
    # the second round ends at 104.5, past the starts due at 103 and 104: one round then, not two
    assert Clock([0.1, 2.5, 0.1, 0.1], rounds=4).run(1.0) == [101.0, 102.0, 104.5, 105.5]


def test_a_stopped_consumer_starts_no_round_after_its_sleep():
    clock = Clock([0.1], rounds=1)
    clock.stopped = lambda: clock.now > 100.5  # stopped while sleeping towards the first round
    assert clock.run(1.0) == []


def test_a_commit_that_raises_ends_the_timer_with_its_error():
    # the consumer's service task then crashes the worker, as a failed timer commit did under Faust
    class Refused(Exception):
        pass

    async def refused() -> None:
        raise Refused

    async def no_wait(_seconds: float) -> None:
        pass

    with pytest.raises(Refused):
        asyncio.run(commit_every(1.0, refused, clock=lambda: 0.0, sleep=no_wait, stopped=lambda: False))


def test_the_eos_consumer_runs_its_timer_commits_through_the_paced_timer(monkeypatch):
    paced: list[tuple[float, object]] = []

    async def recording_timer(interval_s, commit, **_: object) -> None:
        paced.append((interval_s, commit))

    monkeypatch.setattr(consumer_module, "commit_every", recording_timer)

    async def scenario() -> object:
        consumer = worker_app(broker_commit_interval=0.25).consumer
        # the service task Faust starts; Faust's own timer would run until stopped
        await asyncio.wait_for(type(consumer)._commit_handler.fun(consumer), timeout=5)
        return consumer

    consumer = asyncio.run(scenario())
    assert paced == [(0.25, consumer.commit)]
