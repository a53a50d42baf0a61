"""The ACLs a worker's principal needs, and the check a worker makes of them before it starts.

:func:`required` lists them (``faust -A app acls`` prints the list, docs/operations.md
shows it, the ACL test grants exactly it). :func:`missing` asks the cluster
which of them this client lacks, one line each, naming the permission:

* topics that exist: the operations the broker says this client may do on them
  (DescribeTopics with authorized operations, KIP-430);
* changelog topics not created yet: a validate-only CreateTopics;
* the consumer group: DescribeConsumerGroups with authorized operations;
* the cluster's DescribeConfigs: one broker's configs are described;
* under exactly-once, the transactional ids: one transactional producer with
  the id ``<APP_ID>-preflight`` initialises.

Only a refusal is a line; any other error is left to the step that meets it.
A worker meets a missing DescribeConfigs first in :mod:`app.preflight`, and a
missing Create on a pipeline topic as the refusal to create it.
"""
from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from config import Settings

AUTHORIZATION_FAILURES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
PROBE_TIMEOUT_S = 10.0  # each; the cluster answered the checks before this one moments ago
CLUSTER_NAME = "kafka-cluster"  # the one name of the cluster resource (librdkafka calls its type BROKER)
RESOURCE_NAMES = {ResourceType.TOPIC: "topic", ResourceType.GROUP: "group",
                  ResourceType.TRANSACTIONAL_ID: "transactional id", ResourceType.BROKER: "cluster"}
#: as kafka-acls.sh names them
RESOURCE_TYPES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group",
                  ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.BROKER: "Cluster"}
OPERATION_NAMES = {AclOperation.READ: "Read", AclOperation.WRITE: "Write", AclOperation.CREATE: "Create",
                   AclOperation.DESCRIBE: "Describe", AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs"}
TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True)
class Permission:
    """One ACL: an operation on a resource, by name or by name prefix."""

    resource: ResourceType
    name: str
    operation: AclOperation
    why: str
    prefixed: bool = False

    def __str__(self) -> str:
        operation, kind = OPERATION_NAMES[self.operation], RESOURCE_NAMES[self.resource]
        if self.resource == ResourceType.BROKER:
            return f"{operation} on the cluster"
        return (f"{operation} on {kind}s prefixed {self.name!r}" if self.prefixed
                else f"{operation} on {kind} {self.name!r}")

    def row(self) -> tuple[str, str, str, str, str]:
        """Resource type, pattern, name and operation as kafka-acls.sh spells them, and why."""
        return (RESOURCE_TYPES[self.resource], "prefixed" if self.prefixed else "literal",
                self.name or CLUSTER_NAME, OPERATION_NAMES[self.operation], self.why)

    def binding(self, principal: str) -> AclBinding:
        """This permission as an ACL allowing ``principal`` (``User:<name>``) from any host."""
        pattern = ResourcePatternType.PREFIXED if self.prefixed else ResourcePatternType.LITERAL
        return AclBinding(self.resource, self.name or CLUSTER_NAME, pattern, principal, "*", self.operation,
                          AclPermissionType.ALLOW)


def describe_configs() -> Permission:
    return Permission(ResourceType.BROKER, "", AclOperation.DESCRIBE_CONFIGS,
                      "the start check reads the brokers' transaction.max.timeout.ms")


def _topic(name: str, operation: AclOperation, why: str) -> Permission:
    return Permission(ResourceType.TOPIC, name, operation, why)


def required(settings: Settings) -> list[Permission]:
    """Every ACL a worker of ``settings`` needs (each implies Describe on its resource)."""
    s = settings
    wanted = [
        _topic(s.input_topic, AclOperation.READ, "the ingest agent consumes it"),
        _topic(s.by_merchant_topic, AclOperation.READ, "the aggregate agent consumes it"),
        *(_topic(topic, AclOperation.WRITE, "the agents send to it") for topic in s.output_topics),
        *(_topic(topic, AclOperation.CREATE, "the worker creates it if it is missing")
          for topic in (s.input_topic, *s.output_topics)),
        *(Permission(ResourceType.TOPIC, f"{s.app_id}-", operation, "the tables' changelogs", prefixed=True)
          for operation in (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE)),
        Permission(ResourceType.GROUP, s.app_id, AclOperation.READ, "the workers' consumer group"),
        describe_configs(),
    ]
    if s.exactly_once:
        wanted.append(Permission(ResourceType.TRANSACTIONAL_ID, f"{s.app_id}-", AclOperation.WRITE,
                                 "each worker's transactional producers", prefixed=True))
    if s.exactly_once and s.profile == "production":
        wanted += [_topic(TRANSACTION_STATE_TOPIC, operation, "PROFILE=production checks its replication")
                   for operation in (AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)]
    return wanted


def principal(settings: Settings) -> str:
    """This client's principal, as far as the settings tell it."""
    if settings.security.uses_sasl:
        return f"User:{settings.security.username}"
    if settings.security.protocol == "SSL":
        return "this client's certificate"
    return "User:ANONYMOUS"


def _refused(exc: BaseException) -> bool:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and error.code() in AUTHORIZATION_FAILURES


def _allowed_on_topics(admin: AdminClient, topics: list[str]) -> dict[str, set[AclOperation] | None]:
    """Per existing topic, the operations allowed (empty: refused outright); None for a topic not there
    (or a broker that does not say)."""
    allowed: dict[str, set[AclOperation] | None] = {}
    futures = admin.describe_topics(TopicCollection(topics), include_authorized_operations=True,
                                    request_timeout=PROBE_TIMEOUT_S)
    for topic, future in futures.items():
        try:
            operations = future.result().authorized_operations
            allowed[topic] = set(operations) if operations else None  # an empty list: the broker did not say
        except KafkaException as exc:
            allowed[topic] = set() if _refused(exc) else None
    return allowed


def _creatable(admin: AdminClient, topics: list[str], partitions: int, replicas: int) -> dict[str, bool]:
    if not topics:
        return {}
    futures = admin.create_topics([NewTopic(t, partitions, replicas) for t in topics], validate_only=True,
                                  request_timeout=PROBE_TIMEOUT_S)
    outcome = {}
    for topic, future in futures.items():
        try:
            future.result()
            outcome[topic] = True
        except KafkaException as exc:
            outcome[topic] = not _refused(exc)
    return outcome


def _group_readable(admin: AdminClient, group: str) -> bool:
    future = admin.describe_consumer_groups([group], include_authorized_operations=True,
                                            request_timeout=PROBE_TIMEOUT_S)[group]
    try:
        operations = future.result().authorized_operations
        return not operations or AclOperation.READ in operations  # an empty list: the broker did not say
    except KafkaException as exc:
        return not _refused(exc)


def _cluster_configs_readable(admin: AdminClient) -> bool:
    brokers = sorted(admin.list_topics(timeout=PROBE_TIMEOUT_S).brokers)
    resources = [ConfigResource(ResourceType.BROKER, str(broker)) for broker in brokers[:1]]
    for future in admin.describe_configs(resources, request_timeout=PROBE_TIMEOUT_S).values():
        try:
            future.result()
        except KafkaException as exc:
            return not _refused(exc)
    return True


def _transactions_allowed(settings: Settings) -> bool:
    producer = Producer(settings.kafka_client(**{"transactional.id": f"{settings.app_id}-preflight",
                                                 "log_level": 2}))
    try:  # nothing is produced, so there is nothing to flush
        producer.init_transactions(PROBE_TIMEOUT_S)
        return True
    except KafkaException as exc:
        return not _refused(exc)


def missing(settings: Settings, admin: AdminClient, changelogs: list[str]) -> list[str]:
    """One line per permission of :func:`required` this client lacks, as far as the cluster shows it."""
    wanted = required(settings)
    topics = sorted({p.name for p in wanted if p.resource == ResourceType.TOPIC and not p.prefixed} | set(changelogs))
    allowed = _allowed_on_topics(admin, topics)

    def lacking(permission: Permission) -> bool:
        if permission.resource == ResourceType.TOPIC and permission.operation == AclOperation.CREATE:
            # a missing pipeline topic is created before this check, and names Create if refused
            not_there = [t for t in changelogs if allowed.get(t) is None]
            return permission.prefixed and not all(
                _creatable(admin, not_there, settings.partitions, settings.replication_factor).values())
        if permission.resource == ResourceType.TOPIC:
            names = [t for t in changelogs if t.startswith(permission.name)] if permission.prefixed \
                else [permission.name]
            return any(allowed.get(name) is not None and permission.operation not in allowed[name] for name in names)
        if permission.resource == ResourceType.GROUP:
            return not _group_readable(admin, permission.name)
        if permission.resource == ResourceType.BROKER:
            return not _cluster_configs_readable(admin)
        return not _transactions_allowed(settings)

    return [lacks(principal(settings), p) for p in wanted if lacking(p)]


def lacks(who: str, permission: Permission) -> str:
    """The line for a permission ``who`` lacks."""
    return (f"{who} lacks the ACL {permission} ({permission.why}): grant it "
            "(docs/operations.md, ACLs; `faust -A app acls` lists them all)")
