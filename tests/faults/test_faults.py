"""Exactly-once under failures, on the real broker: each fault type once (the short matrix).

The long matrix is a command, not a test: see README, "Proving it: the fault harness".
"""
from __future__ import annotations

import pytest

from tools.faults import FAULTS, FaultRun, Plan, summary

SHORT = dict(workers=3, partitions=6, rate=150.0, duration_s=30.0)


BROKER_RESTART_HANGS = pytest.mark.xfail(
    strict=True,
    reason="known defect: after a broker restart, commits block in send_offsets_to_transaction "
    "and the workers stop making progress (see the issue notes)",
)


@pytest.mark.parametrize(
    "fault",
    [pytest.param(f, marks=BROKER_RESTART_HANGS) if f.startswith("broker-") else f for f in FAULTS],
)
def test_exactly_once_stays_exact(kafka, tmp_path, fault):
    outcome = FaultRun(Plan(faults={fault: 1}, seed=7, **SHORT), "exactly_once", tmp_path).execute()

    assert outcome.faults_done == [fault]
    assert outcome.exact, summary(outcome)


def test_at_least_once_loses_nothing_and_counts_its_duplicates(kafka, tmp_path):
    outcome = FaultRun(Plan(faults={"kill": 2}, seed=9, **SHORT), "at_least_once", tmp_path).execute()

    # duplicates are this guarantee's price: counted in the report, not asserted away
    assert outcome.losses == 0, summary(outcome)
    assert outcome.events_aggregated > 0 and len(outcome.recovery_s) == 2
