"""Shared fixtures: the real Kafka broker (started once per session, checked per test) and isolated pipeline
runs."""
from __future__ import annotations

import os
import re
import uuid
from typing import Callable, Iterator, Optional

import pytest

# The local broker runs with its secured listeners (tests/integration/test_secured_cluster.py): set before
# the settings load, so that every broker (re)start in the tests, the fault harness's too, keeps them.
os.environ.setdefault("BROKER_SECURED", "true")

import config  # noqa: E402
from tests.integration.corpus_support import kill_workers_left  # noqa: E402
from tools import broker  # noqa: E402
from tools.run import PipelineRun  # noqa: E402

NEEDS_BROKER = ("tests/integration/", "tests/faults/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every file of the tiers that need the broker says so (``pytestmark = pytest.mark.broker``), so that
    ``-m "not broker"`` leaves them all out."""
    unmarked = sorted({item.nodeid.split("::")[0] for item in items
                       if item.nodeid.startswith(NEEDS_BROKER) and item.get_closest_marker("broker") is None})
    if unmarked:
        raise pytest.UsageError(f"needs the broker but is not marked broker: {', '.join(unmarked)}")


@pytest.fixture(scope="session")
def session_broker() -> Iterator[config.Settings]:
    """The session's broker: the project's local one (started if needed, and stopped at the end if started
    here) or KAFKA_BOOTSTRAP_SERVERS."""
    settings = config.load()
    started_here = settings.use_local_broker and not broker.is_running(settings)
    broker.ensure_running(settings)
    yield settings
    if started_here:
        broker.stop(settings)


@pytest.fixture
def kafka(session_broker) -> config.Settings:
    """A broker that answers as the test starts: one that an earlier test restarted and could not bring back
    (a fault test on a loaded machine) fails that test alone, not every test after it."""
    if not broker.is_running(session_broker):
        broker.ensure_running(session_broker)
    return session_broker


@pytest.fixture(autouse=True)
def no_corpus_worker_left() -> Iterator[None]:
    """A corpus test that fails before it stops its workers leaves none running."""
    yield
    kill_workers_left()


@pytest.fixture
def pipeline(kafka, request, tmp_path) -> Iterator[Callable[..., PipelineRun]]:
    """Factory of isolated pipeline runs; their workers are stopped after the test."""
    runs: list[PipelineRun] = []

    def make(guarantee: str = "exactly_once", name: Optional[str] = None, **env: str) -> PipelineRun:
        if name is None:
            slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-")
            name = f"t-{slug}-{uuid.uuid4().hex[:6]}"
        run = PipelineRun(name, tmp_path / f"run-{len(runs)}", guarantee=guarantee, **env)
        runs.append(run)
        return run

    yield make
    for run in runs:
        for worker in [*run.workers, *run.followers]:
            worker.kill()
