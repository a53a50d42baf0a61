"""The fault harness stops with a clear reason when the broker's group coordinator stops answering."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from tools import faults


def harness_reading(error_code: int) -> SimpleNamespace:
    """What ``FaultRun._committed`` needs, with an offsets reader that always answers ``error_code``."""

    def committed(partitions, timeout):
        raise KafkaException(KafkaError(error_code))

    return SimpleNamespace(offsets_reader=SimpleNamespace(committed=committed))


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    """``retrying`` as if its deadline had passed: the first answer stands."""
    monkeypatch.setattr(faults, "retrying", lambda ask, timeout_s: ask())


def test_a_coordinator_answering_not_coordinator_past_the_deadline_stops_the_run_saying_what_to_do():
    with pytest.raises(faults.CoordinatorGone, match=r"NOT_COORDINATOR .* wipe the broker"):
        faults.FaultRun._committed(harness_reading(KafkaError.NOT_COORDINATOR), [("payments", 0)])


def test_any_other_error_reading_committed_offsets_is_raised_as_it_is():
    with pytest.raises(KafkaException) as raised:
        faults.FaultRun._committed(harness_reading(KafkaError.GROUP_AUTHORIZATION_FAILED), [("payments", 0)])
    assert not isinstance(raised.value, faults.CoordinatorGone)
