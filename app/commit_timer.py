"""Commit timings of this worker, as a Faust sensor and a web view (``/commits/``).

Every commit round Faust runs (a timer commit, or the hand-over before a
rebalance) is timed from start to end; rounds that committed nothing are left
out. Under ``exactly_once`` a round is one transaction per input partition with
new events, run in parallel, so the round's time is what a commit costs.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any

from faust.sensors import Sensor
from faust.types import ConsumerT
from faust.web import Request, Response, View

from app import app
from faust_eos.faust_internals import committed_offsets

HISTORY = 100_000  # commit rounds kept (hours at a 100 ms commit interval)


class CommitTimer(Sensor):
    """Records (end time, duration, partitions committed) of each commit round."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rounds: deque[tuple[float, float, int]] = deque(maxlen=HISTORY)

    def on_commit_initiated(self, consumer: ConsumerT) -> Any:
        return time.monotonic(), dict(committed_offsets(consumer))

    def on_commit_completed(self, consumer: ConsumerT, state: Any) -> None:
        started, before = state
        committed = committed_offsets(consumer)
        changed = sum(1 for tp, offset in committed.items() if offset is not None and before.get(tp) != offset)
        if changed:
            self.rounds.append((time.time(), time.monotonic() - started, changed))


timer = CommitTimer()
app.sensors.add(timer)


@app.page("/commits/")
class Commits(View):
    """Commit rounds so far: ``[[end_epoch_s, duration_ms, partitions], ...]``."""

    async def get(self, request: Request) -> Response:
        rounds = [[round(end, 3), round(duration * 1000, 2), partitions] for end, duration, partitions in timer.rounds]
        return self.json({"rounds": rounds})
