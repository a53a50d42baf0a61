"""A worker that stops while a rebalance still runs: the rebalance ends, the app does not crash."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from faust_eos.committing.committed_reads import CommittedReads


def reads_whose_threads_are_shut_down(*, stopping: bool) -> SimpleNamespace:
    threads = ThreadPoolExecutor(1)
    threads.shutdown()
    return SimpleNamespace(_threads=threads, _stopping=lambda: stopping)


def test_a_call_for_a_thread_after_the_stop_shut_the_threads_down_cancels_the_rebalance_that_made_it():
    async def call() -> None:
        await CommittedReads._in_thread(reads_whose_threads_are_shut_down(stopping=True), lambda: None)

    with pytest.raises(asyncio.CancelledError):  # a BaseException: Faust's rebalance handler does not crash on it
        asyncio.run(call())


def test_threads_shut_down_without_a_stop_are_still_an_error():
    async def call() -> None:
        await CommittedReads._in_thread(reads_whose_threads_are_shut_down(stopping=False), lambda: None)

    with pytest.raises(RuntimeError, match="shutdown"):
        asyncio.run(call())
