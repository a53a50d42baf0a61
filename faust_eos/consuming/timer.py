"""When the consumer's timer commits start: every commit interval, from one round's start to the next.

Faust's own timer sleeps a whole interval after each round ends, so every
round's duration was added to the period, and to the wait of each event the
round did not reach. Here the rounds keep the interval's pace; a round that
outlasts it is followed at once by one more, and the pace then starts again
from there, without a burst of rounds to catch up.
"""
from __future__ import annotations

from typing import Awaitable, Callable


async def commit_every(
    interval_s: float,
    commit: Callable[[], Awaitable[object]],
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[object]],
    stopped: Callable[[], bool],
) -> None:
    """Call ``commit`` every ``interval_s`` of ``clock``, the first one interval from now, until ``stopped()``."""
    due = clock() + interval_s
    while not stopped():
        await sleep(max(0.0, due - clock()))
        if stopped():
            return
        await commit()
        due = max(due + interval_s, clock())
