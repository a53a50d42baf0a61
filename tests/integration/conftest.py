"""Fixtures of the integration tests (the broker itself: ``tests/conftest.py``)."""
from __future__ import annotations

import uuid
from typing import Iterator

import pytest

from tests.integration.transactions_support import Stalled, create_topic


@pytest.fixture
def stalled(kafka) -> Iterator[Stalled]:
    topic = f"t-stalled-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, 2)
    stalled = Stalled(kafka, topic)
    yield stalled
    stalled.release()
