"""The ACL list follows the settings: the pipeline's topics by name, changelogs, group and transactional ids by prefix."""
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
