"""Commit timings of this worker, as a Faust sensor and a web view (``/commits/``).

Every commit round Faust runs (a timer commit, or the hand-over before a
rebalance) is timed from start to end; rounds that committed nothing are left
out. What counts is what really committed, as the eos:// consumer counts it
(Faust records offsets as committed even when their commit failed): under
``exactly_once`` the input partitions the worker's transaction committed (one
transaction per round, holding every partition with new events), under
``at_least_once`` the partitions of an offset commit the group accepted.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any

from faust.sensors import Sensor
from faust.types import ConsumerT
from faust.web import Request, Response, View

from app import app

HISTORY = 100_000  # commit rounds kept (hours at a 100 ms commit interval)


class CommitTimer(Sensor):
    """Records (end time, duration, partitions committed) of each commit round."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rounds: deque[tuple[float, float, int]] = deque(maxlen=HISTORY)

    def on_commit_initiated(self, consumer: ConsumerT) -> Any:
        return time.monotonic(), consumer.partitions_committed

    def on_commit_completed(self, consumer: ConsumerT, state: Any) -> None:
        started, committed_before = state
        committed = consumer.partitions_committed - committed_before
        if committed:
            self.rounds.append((time.time(), time.monotonic() - started, committed))


timer = CommitTimer()
app.sensors.add(timer)


@app.page("/commits/")
class Commits(View):
    """Commit rounds so far: ``[[end_epoch_s, duration_ms, partitions], ...]``."""

    async def get(self, request: Request) -> Response:
        rounds = [[round(end, 3), round(duration * 1000, 2), partitions] for end, duration, partitions in timer.rounds]
        return self.json({"rounds": rounds})
