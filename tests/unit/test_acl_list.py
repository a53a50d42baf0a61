"""The ACL list follows the settings: the pipeline's topics by name, changelogs, group and transactional ids
by prefix."""
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from app import acls
from config import load


def rows(guarantee: str) -> set[tuple[str, str, str, str]]:
    settings = load({"APP_ID": "pay", "TOPIC_PREFIX": "eu-", "PROCESSING_GUARANTEE": guarantee})
    return {p.row()[:4] for p in acls.required(settings)}


def test_exactly_once_needs_reads_writes_creates_the_group_the_transactional_ids_and_describe_configs():
    assert rows("exactly_once") == {
        ("Topic", "literal", "eu-payments", "Read"),
        ("Topic", "literal", "eu-payments-by-merchant", "Read"),
        *{("Topic", "literal", t, op) for t in ("eu-payments-by-merchant", "eu-merchant-totals", "eu-merchant-windows",
                                               "eu-payments-dlq") for op in ("Write", "Create")},
        ("Topic", "literal", "eu-payments", "Create"),
        *{("Topic", "prefixed", "pay-", op) for op in ("Read", "Write", "Create")},
        ("Group", "literal", "pay", "Read"),
        ("Cluster", "literal", "kafka-cluster", "DescribeConfigs"),
        ("TransactionalId", "prefixed", "pay-", "Write"),
    }


def test_at_least_once_needs_no_transactional_ids():
    assert rows("exactly_once") - rows("at_least_once") == {("TransactionalId", "prefixed", "pay-", "Write")}


def test_a_permission_becomes_an_acl_allowing_the_principal_from_any_host():
    settings = load({"APP_ID": "pay"})
    changelogs = next(p for p in acls.required(settings) if p.prefixed and p.operation == AclOperation.READ)
    binding = changelogs.binding("User:payments")
    assert (binding.restype, binding.name, binding.resource_pattern_type) == (
        ResourceType.TOPIC, "pay-", ResourcePatternType.PREFIXED)
    assert (binding.principal, binding.host, binding.operation) == ("User:payments", "*", AclOperation.READ)
    assert acls.lacks("User:payments", changelogs).startswith(
        "User:payments lacks the ACL Read on topics prefixed 'pay-' (the tables' changelogs): grant it")


class Answered:
    """A future that has its answer: a value, or a KafkaException to raise."""

    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def result(self, timeout=None):
        if self.error is not None:
            raise KafkaException(KafkaError(self.error))
        return self.value


class ScriptedAdmin:
    """Answers the check's requests as a broker with given permissions would."""

    def __init__(self, topics=None, group=(AclOperation.READ,), creatable=True, configs_readable=True):
        self.topics = topics or {}  # topic -> operations (None: the broker does not say), or an error code
        self.group, self.creatable, self.configs_readable = group, creatable, configs_readable

    def describe_topics(self, collection, **_):
        answers = {}
        for topic in collection.topic_names:
            known = self.topics.get(topic, KafkaError.UNKNOWN_TOPIC_OR_PART)
            answers[topic] = (Answered(error=known) if isinstance(known, int)
                              else Answered(SimpleNamespace(authorized_operations=known)))
        return answers

    def create_topics(self, new_topics, **_):
        refused = None if self.creatable else KafkaError.TOPIC_AUTHORIZATION_FAILED
        return {t.topic: Answered(error=refused) for t in new_topics}

    def describe_consumer_groups(self, groups, **_):
        if isinstance(self.group, int):
            return {groups[0]: Answered(error=self.group)}
        return {groups[0]: Answered(SimpleNamespace(authorized_operations=self.group))}

    def list_topics(self, **_):
        return SimpleNamespace(brokers={1: None})

    def describe_configs(self, resources, **_):
        refused = None if self.configs_readable else KafkaError.CLUSTER_AUTHORIZATION_FAILED
        return {resource: Answered(error=refused) for resource in resources}


ALL = [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE]
AT_LEAST_ONCE = load({"APP_ID": "pay", "PROCESSING_GUARANTEE": "at_least_once", "KAFKA_BOOTSTRAP_SERVERS": "k:1",
                      "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN",
                      "KAFKA_SASL_USERNAME": "payments", "KAFKA_SASL_PASSWORD": "p"})
CHANGELOG = "pay-merchant-totals-changelog"


def pipeline_topics(operations):
    return {t: operations for t in (AT_LEAST_ONCE.input_topic, *AT_LEAST_ONCE.output_topics)}


def test_nothing_is_missing_when_the_broker_allows_all_or_does_not_say():
    assert acls.missing(AT_LEAST_ONCE, ScriptedAdmin(pipeline_topics(ALL) | {CHANGELOG: ALL}), [CHANGELOG]) == []
    silent = ScriptedAdmin(pipeline_topics(None) | {CHANGELOG: []}, group=[])
    assert acls.missing(AT_LEAST_ONCE, silent, [CHANGELOG]) == []


def test_each_refusal_is_one_line_naming_the_acl():
    admin = ScriptedAdmin({**pipeline_topics(ALL), AT_LEAST_ONCE.totals_topic: [AclOperation.READ],
                           CHANGELOG: KafkaError.TOPIC_AUTHORIZATION_FAILED},
                          group=KafkaError.GROUP_AUTHORIZATION_FAILED, configs_readable=False)
    lines = acls.missing(AT_LEAST_ONCE, admin, [CHANGELOG])
    assert [line.split(" (")[0] for line in lines] == [
        "User:payments lacks the ACL Write on topic 'merchant-totals'",
        "User:payments lacks the ACL Read on topics prefixed 'pay-'",
        "User:payments lacks the ACL Write on topics prefixed 'pay-'",
        "User:payments lacks the ACL Read on group 'pay'",
        "User:payments lacks the ACL DescribeConfigs on the cluster",
    ]


def test_a_changelog_not_created_yet_needs_create_on_the_prefix():
    admin = ScriptedAdmin(pipeline_topics(ALL), creatable=False)
    assert [line.split(" (")[0] for line in acls.missing(AT_LEAST_ONCE, admin, [CHANGELOG])] == [
        "User:payments lacks the ACL Create on topics prefixed 'pay-'"]
    assert acls.missing(AT_LEAST_ONCE, ScriptedAdmin(pipeline_topics(ALL)), [CHANGELOG]) == []


def test_errors_that_are_not_refusals_are_left_to_the_step_that_meets_them():
    admin = ScriptedAdmin({t: KafkaError._TIMED_OUT for t in pipeline_topics(ALL)}, group=KafkaError._TRANSPORT)
    assert acls.missing(AT_LEAST_ONCE, admin, []) == []


def test_production_asks_to_describe_the_transaction_state_log():
    def named(settings):
        return {p.row()[2:4] for p in acls.required(settings)}

    extra = named(load({"APP_ID": "pay", "PROFILE": "production"})) - named(load({"APP_ID": "pay"}))
    assert extra == {("__transaction_state", "Describe"), ("__transaction_state", "DescribeConfigs")}
