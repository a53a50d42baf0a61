"""While max_uncommitted_records wait for their commit, the consumer hands out no new input.

The agents go on with what they hold, so the events whose records wait can
finish and commit; each commit that ends lets the consumer look again, and one
that commits nothing ends the wait. A real faust-eos consumer (no broker), its
count of waiting records and its commits stood in for.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, AsyncIterator

import pytest
from faust.types import TP
from faust_contract_support import worker_app

from faust_eos.faust_internals import ConsumerHooks

PAYMENTS = TP("payments", 0)


async def fetched(*offsets: int) -> AsyncIterator[tuple[TP, Any]]:
    for offset in offsets:
        yield PAYMENTS, SimpleNamespace(offset=offset)


class Handing:
    """A consumer with ``limit`` as its max_uncommitted_records, handing out what ``fetched`` brings."""

    def __init__(self, guarantee: str, limit: int, waiting: int) -> None:
        app = worker_app(guarantee, broker=f"eos://localhost:9092?max_uncommitted_records={limit}")
        app.flow_control.resume()
        self.consumer = app.consumer
        self.app = app
        self.waiting = waiting
        self.early_commits = 0
        self.handed_out: list[int] = []
        self.consumer.uncommitted_records = lambda: self.waiting
        self.consumer.commit_early = self._commit_early
        self.consumer._admit = lambda tp, message: True  # what Delivery would decide is not the point here

    def _commit_early(self) -> None:
        self.early_commits += 1

    async def hand_out(self, *offsets: int) -> None:
        async for _, message in self.consumer._admitted(fetched(*offsets)):
            self.handed_out.append(message.offset)

    def commit_ends(self, waiting: int, partitions_committed: int = 1, began_during_the_wait: bool = True) -> None:
        self.waiting = waiting
        self.consumer._commits_begun += began_during_the_wait
        self.consumer.partitions_committed += partitions_committed
        self.consumer._commit_ended.set()


async def until(condition: Any, turns: int = 10_000) -> None:
    """Let the loop run until ``condition()`` holds; fail if it never does."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"still not so after {turns} turns of the event loop")


async def finished(task: "asyncio.Future[None]") -> None:
    """Wait for ``task``; fail rather than hang if it never ends."""
    await asyncio.wait_for(task, timeout=30)


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_at_the_limit_nothing_more_is_handed_out_and_a_commit_starts_until_one_makes_room(guarantee):
    async def scenario() -> None:
        handing = Handing(guarantee, limit=10, waiting=10)
        task = asyncio.ensure_future(handing.hand_out(5, 6))
        await until(lambda: handing.early_commits == 1)
        assert handing.handed_out == []
        handing.commit_ends(waiting=9)
        await finished(task)
        assert handing.handed_out == [5, 6]

    asyncio.run(scenario())


def test_below_the_limit_input_is_handed_out_without_waiting_or_committing():
    async def scenario() -> None:
        handing = Handing("exactly_once", limit=10, waiting=9)
        await handing.hand_out(5, 6, 7)
        assert handing.handed_out == [5, 6, 7] and handing.early_commits == 0

    asyncio.run(scenario())


def test_a_commit_that_leaves_the_limit_reached_starts_another_before_anything_is_handed_out():
    async def scenario() -> None:
        handing = Handing("exactly_once", limit=10, waiting=12)
        task = asyncio.ensure_future(handing.hand_out(5))
        await until(lambda: handing.early_commits == 1)
        handing.commit_ends(waiting=11)  # the events still running staged more
        await until(lambda: handing.early_commits == 2)
        assert handing.handed_out == []
        handing.commit_ends(waiting=0)
        await finished(task)
        assert handing.handed_out == [5]

    asyncio.run(scenario())


def test_a_rebalance_ends_the_wait_and_the_delivery_ledger_decides_what_goes():
    async def scenario() -> None:
        handing = Handing("exactly_once", limit=10, waiting=10)
        refused: list[int] = []
        handing.consumer._admit = lambda tp, message: refused.append(message.offset) and False
        task = asyncio.ensure_future(handing.hand_out(5))
        await until(lambda: handing.early_commits == 1)
        handing.app.flow_control.suspend()
        handing.commit_ends(waiting=10)
        await finished(task)
        assert handing.handed_out == [] and refused == [5]

    asyncio.run(scenario())


def test_a_commit_that_commits_nothing_ends_the_wait_and_the_next_waits_a_commit_interval_later():
    async def scenario() -> None:
        handing = Handing("exactly_once", limit=10, waiting=10)
        first = asyncio.ensure_future(handing.hand_out(5))
        await until(lambda: handing.early_commits == 1)
        handing.commit_ends(waiting=10, partitions_committed=0)  # failed, or its events still run
        await finished(first)
        assert handing.handed_out == [5]
        await handing.hand_out(6)  # within the commit interval: no wait
        assert handing.handed_out == [5, 6] and handing.early_commits == 1
        handing.consumer._no_wait_until = handing.consumer.loop.time()  # the interval has passed
        later = asyncio.ensure_future(handing.hand_out(7))
        await until(lambda: handing.early_commits == 2)
        assert handing.handed_out == [5, 6]
        handing.commit_ends(waiting=0)
        await finished(later)

    asyncio.run(scenario())


def test_every_commit_that_ends_tells_a_waiting_consumer_to_look_again_even_one_that_raised(monkeypatch):
    async def failing_commit(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("broker away")

    monkeypatch.setattr(ConsumerHooks, "force_commit", failing_commit, raising=False)  # Faust's own commit, below ours

    async def scenario() -> None:
        consumer = worker_app().consumer
        consumer._commit_ended.clear()
        with pytest.raises(RuntimeError):
            await consumer.force_commit()
        assert consumer._commit_ended.is_set()

    asyncio.run(scenario())


def test_a_commit_that_began_before_the_wait_and_commits_nothing_does_not_end_it():
    async def scenario() -> None:
        handing = Handing("exactly_once", limit=10, waiting=10)
        task = asyncio.ensure_future(handing.hand_out(5))
        await until(lambda: handing.early_commits == 1)
        handing.commit_ends(waiting=10, partitions_committed=0, began_during_the_wait=False)  # joined a running one
        await until(lambda: handing.early_commits == 2)
        assert handing.handed_out == []
        handing.commit_ends(waiting=3)
        await finished(task)
        assert handing.handed_out == [5]

    asyncio.run(scenario())
