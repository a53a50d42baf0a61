"""The benchmark's warm-up: measured load starts only once every worker of the group is ready."""
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.pipeline import warm_up


class FakeWorker:
    """A worker whose ``/ready`` answers False ``not_ready_for`` times, then True."""

    def __init__(self, name: str, not_ready_for: int) -> None:
        self.name = name
        self.not_ready_for = not_ready_for
        self.asked = 0

    def ready(self) -> bool:
        self.asked += 1
        return self.asked > self.not_ready_for

    def alive(self) -> bool:
        return True

    def log_text(self) -> str:
        return ""


class FakeRun:
    def __init__(self, workers: list[FakeWorker]) -> None:
        self.workers = workers
        self.run_dir = Path("/runs/fake")
        self.produced: list = []

    def produce(self, spec) -> None:
        self.produced.append(spec)


class VisibleWatcher:
    """Every warm-up event is visible at once: the first worker made it visible alone."""

    def __init__(self, seed: int, count: int) -> None:
        self.by_seed = Counter({str(seed): count})


def test_the_warm_up_waits_for_every_worker_to_be_ready_after_its_load_is_visible():
    joining = FakeWorker("worker-1", not_ready_for=3)  # still joining when the first made the load visible
    run = FakeRun([FakeWorker("worker-0", not_ready_for=0), joining])

    restarted = warm_up(run, VisibleWatcher(11, 50), 11, 50, 0, timeout_s=30, progress=lambda line: None)

    assert restarted == 0
    assert len(run.produced) == 1 and run.produced[0].count == 50
    assert joining.asked == 4  # asked until it answered ready, not once more


def test_a_worker_that_never_gets_ready_times_the_warm_up_out_naming_ready_and_the_logs():
    run = FakeRun([FakeWorker("worker-0", not_ready_for=10**9)])

    with pytest.raises(TimeoutError, match=r"/ready \(worker logs in /runs/fake\)"):
        warm_up(run, VisibleWatcher(11, 50), 11, 50, 0, timeout_s=0.5, progress=lambda line: None)


def test_workers_without_the_ready_view_are_not_asked():
    stock = FakeWorker("worker-0", not_ready_for=10**9)  # stock Faust serves no /ready

    warm_up(FakeRun([stock]), VisibleWatcher(11, 50), 11, 50, 0, timeout_s=30, progress=lambda line: None,
            until_ready=False)

    assert stock.asked == 0
