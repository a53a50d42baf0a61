"""A broker restart in the middle of a fault test, with the markers a Kafka 4.4.0 broker can lose written back."""
from __future__ import annotations

import contextlib
import time
import warnings
from typing import Iterator

from app.kafka import admin
from config import Settings
from tests.faults.test_faults import BrokerLostMarkers
from tools import broker
from tools.markers import MarkerMender


@contextlib.contextmanager
def broker_restarted(settings: Settings) -> Iterator[None]:
    """Kill the broker of ``settings`` and start it again; until the block ends, write the markers it lost on
    the topics ``settings`` names (its topic prefix, its app id) as an operator would
    (:class:`tools.markers.MarkerMender`), each reported as a :class:`BrokerLostMarkers` warning."""
    broker.kill(settings)
    broker.ensure_running(settings)
    restarted_admin = admin(settings)  # the harness's after a restart: one of the new broker's
    mender = MarkerMender(settings, lambda: restarted_admin, time.monotonic())
    mender.start()
    try:
        yield
    finally:
        mender.stop(last_check=False)
        for line in mender.written:
            warnings.warn(BrokerLostMarkers(line), stacklevel=2)
