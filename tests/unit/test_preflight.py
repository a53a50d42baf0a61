"""Checks of the settings against facts about the cluster, and the topics a worker creates, without a broker."""
import pytest

from app.preflight import ClusterFacts, create_missing_topics, problems
from config import load
from kafka_ops.topics import TopicRefused

SINGLE_NODE = ClusterFacts(max_transaction_timeout_ms=900_000, state_log_replication_factor=1, state_log_min_isr=1,
                           topic_partitions={}, state_topic_replication_factor=1, state_topic_min_isr=1)
PRODUCTION_CLUSTER = ClusterFacts(max_transaction_timeout_ms=900_000, state_log_replication_factor=3,
                                  state_log_min_isr=2, topic_partitions={}, state_topic_replication_factor=3,
                                  state_topic_min_isr=2)


def with_facts(facts, **changes):
    return ClusterFacts(**{**facts.__dict__, **changes})


def test_defaults_pass_on_a_single_node_cluster():
    assert problems(load({}), SINGLE_NODE) == []


def test_transaction_timeout_above_the_broker_maximum_names_both_values():
    [line] = problems(load({"TRANSACTION_TIMEOUT_MS": "120000"}),
                      with_facts(SINGLE_NODE, max_transaction_timeout_ms=60_000))
    assert line.startswith("TRANSACTION_TIMEOUT_MS=120000 is above the brokers' transaction.max.timeout.ms=60000")


def test_transaction_timeout_is_not_checked_without_transactions():
    settings = load({"TRANSACTION_TIMEOUT_MS": "120000", "PROCESSING_GUARANTEE": "at_least_once"})
    assert problems(settings, with_facts(SINGLE_NODE, max_transaction_timeout_ms=60_000)) == []


def test_each_topic_with_another_partition_count_is_reported():
    facts = with_facts(SINGLE_NODE, topic_partitions={"payments": 6, "app-seen-events-changelog": 3, "x": 2})
    lines = problems(load({}), facts)
    assert [line.split(" has ")[0] for line in lines] == ["topic 'app-seen-events-changelog'", "topic 'x'"]
    assert "set PARTITIONS=3" in lines[0]


def test_production_profile_reports_every_shortfall_in_one_line():
    [line] = problems(load({"PROFILE": "production"}), SINGLE_NODE)
    assert line.startswith("PROFILE=production needs")
    assert line.count("(needs 3)") == 2 and line.count("(needs 2)") == 2


def test_production_profile_passes_on_a_replicated_transaction_log():
    assert problems(load({"PROFILE": "production"}), PRODUCTION_CLUSTER) == []


def test_production_profile_without_a_transaction_state_topic_checks_the_broker_settings():
    facts = with_facts(PRODUCTION_CLUSTER, state_topic_replication_factor=None, state_topic_min_isr=None,
                       state_log_min_isr=1)
    [line] = problems(load({"PROFILE": "production"}), facts)
    assert "transaction.state.log.min.isr is 1 (needs 2)" in line


def test_production_profile_does_not_need_a_transaction_log_under_at_least_once():
    assert problems(load({"PROFILE": "production", "PROCESSING_GUARANTEE": "at_least_once"}), SINGLE_NODE) == []


class FakeCluster:
    """Creates topics like a cluster would, refusing those it is told to, and records what it was asked."""

    def __init__(self, refuse: dict[str, str] | None = None) -> None:
        self.refuse = refuse or {}
        self.asked: list[tuple[list[str], int, int]] = []

    def create(self, topics: list[str], partitions: int, replication_factor: int) -> list[TopicRefused]:
        self.asked.append((list(topics), partitions, replication_factor))
        return [TopicRefused(t, self.refuse[t], "Authorization failed.") for t in topics if t in self.refuse]


PIPELINE = ["payments", "payments-by-merchant", "merchant-totals", "merchant-windows", "payments-dlq"]


def test_every_pipeline_topic_the_cluster_lacks_is_created_with_the_pipelines_partitions_and_replication():
    cluster = FakeCluster()
    lines = create_missing_topics(load({"PARTITIONS": "4"}), {"payments", "merchant-totals", "other"}, cluster.create)
    assert lines == []
    assert cluster.asked == [(["payments-by-merchant", "merchant-windows", "payments-dlq"], 4, 1)]


def test_topic_names_follow_the_topic_prefix():
    cluster = FakeCluster()
    create_missing_topics(load({"TOPIC_PREFIX": "staging-"}), set(), cluster.create)
    assert cluster.asked[0][0] == [f"staging-{topic}" for topic in PIPELINE]


def test_nothing_is_created_when_every_topic_exists():
    cluster = FakeCluster()
    assert create_missing_topics(load({}), set(PIPELINE), cluster.create) == [] and cluster.asked == []


@pytest.mark.parametrize("error", ["TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "POLICY_VIOLATION",
                                   "INVALID_REPLICATION_FACTOR"])
def test_a_refused_topic_is_one_line_naming_it_and_the_fix(error):
    cluster = FakeCluster(refuse={"merchant-windows": error})
    [line] = create_missing_topics(load({"PARTITIONS": "4"}), {"payments"}, cluster.create)
    assert line == (f"topic 'merchant-windows' is missing and the cluster refused to create it ({error}: "
                    "Authorization failed.): create it with 4 partitions (replication factor 1), "
                    "or grant this client Create on it")


def test_each_refused_topic_has_its_own_line():
    cluster = FakeCluster(refuse={"merchant-windows": "TOPIC_AUTHORIZATION_FAILED",
                                  "payments-dlq": "TOPIC_AUTHORIZATION_FAILED"})
    lines = create_missing_topics(load({}), set(), cluster.create)
    assert [line.split(" is missing")[0] for line in lines] == ["topic 'merchant-windows'", "topic 'payments-dlq'"]
