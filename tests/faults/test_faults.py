"""Exactly-once under failures, on the real broker: each fault type once (the short matrix).

The long matrix is a command, not a test: see docs/fault-harness.md.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from tools.fault_outcome import Outcome, summary
from tools.faults import FAULTS, FaultRun, Plan

pytestmark = pytest.mark.broker

SHORT = dict(workers=3, partitions=6, rate=150.0, duration_s=30.0)


class BrokerLostMarkers(UserWarning):
    """The broker lost a transaction's markers and the harness wrote them (docs/limitations.md)."""


def execute(plan: Plan, guarantee: str, tmp_path: Path) -> Outcome:
    """One fault run; markers the harness had to write for the broker show in pytest's warnings."""
    outcome = FaultRun(plan, guarantee, tmp_path).execute()
    for line in outcome.lost_markers_written:
        warnings.warn(BrokerLostMarkers(line), stacklevel=2)
    return outcome


@pytest.mark.parametrize("fault", FAULTS)
def test_exactly_once_stays_exact(kafka, tmp_path, fault):
    outcome = execute(Plan(faults={fault: 1}, seed=7, **SHORT), "exactly_once", tmp_path)

    assert outcome.faults_done == [fault]
    assert outcome.exact, summary(outcome)


def test_exactly_once_stays_exact_with_standby_replicas_taking_over(kafka, tmp_path):
    plan = Plan(faults={"kill": 1, "rebalance": 1}, seed=8, standby_replicas=1, **SHORT)
    outcome = execute(plan, "exactly_once", tmp_path)

    assert sorted(outcome.faults_done) == ["kill", "rebalance"]
    assert outcome.exact, summary(outcome)


def test_exactly_once_stays_exact_when_a_worker_lost_inside_its_transaction_hides_what_follows_it(kafka, tmp_path):
    # With a minute of transaction timeout, the lost worker's transaction stays open through the
    # rebalances that follow: what the partitions' next owners commit lies behind it, out of a
    # restore's sight, until the broker aborts it. (Seed 12: the loss, then the rebalance.)
    plan = Plan(faults={"lose": 1, "rebalance": 1}, seed=12, transaction_timeout_ms=60_000, **SHORT)
    outcome = execute(plan, "exactly_once", tmp_path)

    assert outcome.faults_done == ["lose", "rebalance"]
    # lost inside its transaction, owning partitions
    assert len(outcome.recovery_after_loss_s) == 1, summary(outcome)
    assert not [note for note in outcome.notes if "outside a transaction" in note], summary(outcome)
    assert outcome.exact, summary(outcome)


def test_at_least_once_runs_the_same_faults_duplicating_but_never_losing(kafka, tmp_path):
    plan = Plan(faults={"kill": 2}, seed=9, **SHORT)
    outcome = execute(plan, "at_least_once", tmp_path)

    # duplicates are this guarantee's price: the report counts them; a lost event is a defect
    assert outcome.faults_done == ["kill", "kill"]
    assert outcome.losses == 0, summary(outcome)
    assert outcome.events_in == int(plan.rate * plan.duration_s)
    assert outcome.checks["verifier saw every committed update"], summary(outcome)
    assert outcome.checks["no worker died unasked"], summary(outcome)
    assert outcome.checks["reconcile --follow: watermark at the input's end"], summary(outcome)
    assert outcome.checks["reconcile --follow: nothing missing"], summary(outcome)
