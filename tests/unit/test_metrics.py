"""Pure parts of operating a worker: lag arithmetic, readiness, settings."""

import pytest
from faust.types import TP
from prometheus_client import REGISTRY

from app import metrics
from config import ConfigError, load

A, B, C = TP("payments", 0), TP("payments", 1), TP("payments", 2)


def test_consumer_lag_is_lso_minus_position():
    assert metrics.consumer_lags({A: 100, B: 50}, {A: 40, B: 50}) == {A: 60, B: 0}


def test_consumer_lag_leaves_out_partitions_without_a_position_or_an_lso():
    assert metrics.consumer_lags({A: 100, B: 50}, {A: None, B: 10, C: 5}) == {B: 40}


def test_consumer_lag_is_never_negative():
    # the position can pass the LSO read a moment earlier
    assert metrics.consumer_lags({A: 10}, {A: 12}) == {A: 0}


def test_lso_lag_is_high_watermark_minus_lso_where_both_are_known():
    assert metrics.lso_lags({A: 120, B: 50, C: 9}, {A: 100, B: 50}) == {A: 20, B: 0}


def test_lso_lag_is_never_negative():
    assert metrics.lso_lags({A: 10}, {A: 11}) == {A: 0}


@pytest.mark.parametrize(
    "state, reason",
    [
        (dict(recovered=True, in_recovery=False, rebalancing=False, source_partitions=3), None),
        (dict(recovered=False, in_recovery=False, rebalancing=False, source_partitions=3), "recovering"),
        (dict(recovered=True, in_recovery=True, rebalancing=False, source_partitions=3), "recovering"),
        (dict(recovered=True, in_recovery=False, rebalancing=True, source_partitions=3), "rebalancing"),
        (dict(recovered=True, in_recovery=False, rebalancing=False, source_partitions=0), "no partitions"),
    ],
    ids=repr,
)
def test_ready_only_when_restored_and_assigned(state, reason):
    got = metrics.not_ready_reason(**state)
    assert got is None if reason is None else got.startswith(reason)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_agent_metrics_count_dead_letters_by_reason():
    labels = dict(agent="ingest-test", topic="payments", reason="not_json")
    before = sample("faust_eos_events_dead_lettered_total", **labels)
    metrics.AgentMetrics("ingest-test", "payments", ["not_json"]).dead_lettered("not_json")
    assert sample("faust_eos_events_dead_lettered_total", **labels) - before == 1


def test_every_series_of_an_agent_exists_at_zero_before_its_first_count():
    # rate() and increase() cannot see the first count of a series that appears already counting
    metrics.AgentMetrics("fresh-agent", "payments", ["not_json", "conflict"])
    for name in ("events_in", "events_aggregated", "events_deduplicated", "events_conflicting"):
        assert REGISTRY.get_sample_value(f"faust_eos_{name}_total", dict(agent="fresh-agent", topic="payments")) == 0
    for reason in ("not_json", "conflict"):
        assert REGISTRY.get_sample_value("faust_eos_events_dead_lettered_total",
                                         dict(agent="fresh-agent", topic="payments", reason=reason)) == 0


def test_standby_replicas_default_to_none():
    assert load({}).standby_replicas == 0
    assert load({"STANDBY_REPLICAS": "1"}).standby_replicas == 1


@pytest.mark.parametrize("raw", ["-1", "one"])
def test_bad_standby_replicas_name_the_variable(raw):
    with pytest.raises(ConfigError, match="STANDBY_REPLICAS"):
        load({"STANDBY_REPLICAS": raw})
