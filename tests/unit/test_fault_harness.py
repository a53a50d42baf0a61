"""The fault harness stops with a clear reason when the broker's group coordinator stops answering."""
from __future__ import annotations

import json
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


def test_a_run_stopped_by_the_coordinator_exits_2_and_the_report_keeps_the_runs_measured_before_it(
        monkeypatch, tmp_path, capsys):
    class Run:
        def __init__(self, plan, guarantee, run_dir) -> None:
            self.plan, self.guarantee = plan, guarantee

        def execute(self) -> faults.Outcome:
            if self.guarantee == faults.GUARANTEES[1]:
                raise faults.CoordinatorGone("NOT_COORDINATOR for 120 s: wipe the broker")
            return faults.Outcome(self.guarantee, {}, events_in=10, events_aggregated=10)

    monkeypatch.setattr(faults, "FaultRun", Run)
    monkeypatch.setattr(faults.config, "load", lambda: SimpleNamespace(use_local_broker=False))
    report = tmp_path / "report.json"
    assert faults.main(["--guarantee", "both", "--json", str(report)]) == 2
    assert [run["guarantee"] for run in json.loads(report.read_text())] == [faults.GUARANTEES[0]]
    assert "the run stopped, with nothing measured: NOT_COORDINATOR" in capsys.readouterr().err
