"""Checks a worker makes against the cluster before it starts, so a bad setting stops it at once.

Settings that are wrong on their own (an unknown PROCESSING_GUARANTEE, a commit
interval too close to the transaction timeout) are refused when :mod:`config`
loads. What needs the cluster is checked here, when ``faust -A app worker``
starts (through the app's ``Worker`` class; other commands skip it):

* under exactly-once, TRANSACTION_TIMEOUT_MS must not exceed the brokers'
  ``transaction.max.timeout.ms``;
* existing input and changelog topics must have PARTITIONS partitions;
* the cluster answers and accepts the security settings (never retried once refused);
* with PROFILE=production, the transaction state log must be replicated enough
  for exactly-once to survive a broker loss (replication factor 3, min ISR 2).

Then the pipeline's input and output topics the cluster lacks are created, with
PARTITIONS partitions and the pipeline's replication factor: clusters usually
do not create topics on first use, and a transaction sending to a missing topic
only times out. Last, the ACLs this client needs are checked (:mod:`app.acls`).

Each problem (or topic the cluster refused to create) is one line naming the
setting and the fix; the worker prints them and exits with status 1.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, NoReturn

import faust
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from app import acls
from app.acls import TRANSACTION_STATE_TOPIC
from app.kafka import pipeline_topics
from config import Settings, settings
from kafka_ops.topics import TopicRefused, create_topics, partition_counts
from kafka_ops.wire import KafkaWireError
from kafka_ops.wire_security import cluster as wire_cluster

PRODUCTION_REPLICATION_FACTOR = 3
PRODUCTION_MIN_ISR = 2
REACH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ClusterFacts:
    """What the checks need to know about the cluster."""

    max_transaction_timeout_ms: int  # lowest transaction.max.timeout.ms over the brokers
    state_log_replication_factor: int  # lowest transaction.state.log.replication.factor
    state_log_min_isr: int  # lowest transaction.state.log.min.isr
    topic_partitions: dict[str, int]  # existing topics among those checked -> partition count
    state_topic_replication_factor: int | None  # of __transaction_state, if it exists
    state_topic_min_isr: int | None  # min.insync.replicas of __transaction_state, if it exists


def problems(settings: Settings, facts: ClusterFacts) -> list[str]:
    """Every reason ``settings`` cannot run on this cluster, one line each."""
    found = []
    if settings.exactly_once and settings.transaction_timeout_ms > facts.max_transaction_timeout_ms:
        found.append(
            f"TRANSACTION_TIMEOUT_MS={settings.transaction_timeout_ms} is above the brokers' "
            f"transaction.max.timeout.ms={facts.max_transaction_timeout_ms}: set TRANSACTION_TIMEOUT_MS to at most "
            f"{facts.max_transaction_timeout_ms} (or raise transaction.max.timeout.ms on the brokers)"
        )
    for topic, count in sorted(facts.topic_partitions.items()):
        if count != settings.partitions:
            found.append(
                f"topic {topic!r} has {count} partitions but PARTITIONS={settings.partitions}: set "
                f"PARTITIONS={count}, or delete the pipeline's topics so they are created with {settings.partitions}"
            )
    if settings.profile == "production" and settings.exactly_once:
        durability = [
            ("the brokers' transaction.state.log.replication.factor", facts.state_log_replication_factor,
             PRODUCTION_REPLICATION_FACTOR),
            ("the brokers' transaction.state.log.min.isr", facts.state_log_min_isr, PRODUCTION_MIN_ISR),
            (f"the replication factor of {TRANSACTION_STATE_TOPIC}", facts.state_topic_replication_factor,
             PRODUCTION_REPLICATION_FACTOR),
            (f"min.insync.replicas of {TRANSACTION_STATE_TOPIC}", facts.state_topic_min_isr, PRODUCTION_MIN_ISR),
        ]
        short = [f"{what} is {value} (needs {needed})" for what, value, needed in durability
                 if value is not None and value < needed]
        if short:
            found.append(f"PROFILE=production needs a transaction state log that survives a broker loss: "
                         f"{', '.join(short)}: fix the cluster, or use PROFILE=local on a test cluster")
    return found


def create_missing_topics(settings: Settings, existing: Collection[str],
                          create: Callable[[list[str], int, int], list[TopicRefused]]) -> list[str]:
    """Create the pipeline's topics not in ``existing`` with ``create(topics, partitions, replication_factor)``.

    Returns one line per topic the cluster refused, naming the fix.
    """
    missing = [topic for topic in pipeline_topics(settings) if topic not in existing]
    if not missing:
        return []
    return [
        f"topic {r.topic!r} is missing and the cluster refused to create it ({r.error}: {r.reason}): "
        f"create it with {settings.partitions} partitions (replication factor {settings.replication_factor}), "
        "or grant this client Create on it"
        for r in create(missing, settings.partitions, settings.replication_factor)
    ]


def _admin(settings: Settings) -> AdminClient:
    # errors reach us as exceptions; librdkafka's own connection logs would only repeat them
    return AdminClient(settings.kafka_client(log_level=2))


def _int_config(entries: dict[str, Any], name: str) -> int:
    return int(entries[name].value)


def wait_reachable(client: dict[str, Any], timeout_s: float) -> None:
    """Return once a broker answers Kafka requests and accepts the security settings.

    Raises KafkaWireError after ``timeout_s``, or at once if TLS or SASL refused the client.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            wire_cluster(client, timeout_s=5.0).close()
            return
        except KafkaWireError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def gather(settings: Settings, admin: AdminClient, topics: list[str],
           timeout_s: float = REACH_TIMEOUT_S) -> ClusterFacts:
    """Ask the cluster, through ``admin``, for what :func:`problems` checks.

    Raises KafkaWireError if no broker answers within ``timeout_s``, KafkaException
    if a request fails.
    """
    wait_reachable(settings.kafka_client(), timeout_s)
    metadata = admin.list_topics(timeout=timeout_s)
    brokers = [ConfigResource(ResourceType.BROKER, str(node_id)) for node_id in sorted(metadata.brokers)]
    resources = list(brokers)
    state_topic = metadata.topics.get(TRANSACTION_STATE_TOPIC)
    if state_topic is not None:
        resources.append(ConfigResource(ResourceType.TOPIC, TRANSACTION_STATE_TOPIC))
    described = {resource: future.result(timeout_s)
                 for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items()}
    broker_configs = [entries for resource, entries in described.items() if resource.restype == ResourceType.BROKER]
    topic_configs = [entries for resource, entries in described.items() if resource.restype == ResourceType.TOPIC]
    return ClusterFacts(
        max_transaction_timeout_ms=min(_int_config(c, "transaction.max.timeout.ms") for c in broker_configs),
        state_log_replication_factor=min(_int_config(c, "transaction.state.log.replication.factor")
                                         for c in broker_configs),
        state_log_min_isr=min(_int_config(c, "transaction.state.log.min.isr") for c in broker_configs),
        topic_partitions={t: len(metadata.topics[t].partitions) for t in topics
                          if t in metadata.topics and metadata.topics[t].error is None},
        state_topic_replication_factor=(min(len(p.replicas) for p in state_topic.partitions.values())
                                        if state_topic is not None and state_topic.partitions else None),
        state_topic_min_isr=_int_config(topic_configs[0], "min.insync.replicas") if topic_configs else None,
    )


def changelog_topics(app: faust.App) -> list[str]:
    return sorted({table.changelog_topic.get_topic_name() for table in app.tables.values()})


def checked_topics(app: faust.App) -> list[str]:
    """The topics agents consume and the tables' changelogs."""
    inputs = {topic for agent in app.agents.values() for topic in agent.channel.topics}
    return sorted(inputs | set(changelog_topics(app)))


def _exit(lines: list[str]) -> NoReturn:
    for line in lines:
        print(f"error: {line}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def _unreachable(exc: KafkaWireError) -> str:
    if not exc.retriable:  # a TLS or SASL setting: the line says which
        return f"cannot connect to the cluster: {exc}"
    return f"cannot check the settings against the cluster: {exc} (is the broker running? see KAFKA_BOOTSTRAP_SERVERS)"


def exit_unless_reachable(settings: Settings) -> None:
    """For commands: exit 1 with one line unless the cluster answers and accepts the security settings."""
    try:
        wait_reachable(settings.kafka_client(), REACH_TIMEOUT_S)
    except KafkaWireError as exc:
        _exit([_unreachable(exc)])


def _create_pipeline_topics(settings: Settings, admin: AdminClient) -> list[str]:
    existing = partition_counts(admin, pipeline_topics(settings), REACH_TIMEOUT_S)

    def create(topics: list[str], partitions: int, replication_factor: int) -> list[TopicRefused]:
        return create_topics(admin, topics, partitions, replication_factor, REACH_TIMEOUT_S)

    return create_missing_topics(settings, existing, create)


class Worker(faust.Worker):
    """``faust worker`` that checks the settings against the cluster, and creates missing topics, before starting."""

    def execute_from_commandline(self) -> NoReturn:
        try:
            admin = _admin(settings)  # one client for every check
            found = problems(settings, gather(settings, admin, checked_topics(self.app)))
            if not found:
                found = _create_pipeline_topics(settings, admin)
            if not found:
                found = acls.missing(settings, admin, changelog_topics(self.app))
        except KafkaWireError as exc:
            _exit([_unreachable(exc)])
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:  # gather's DescribeConfigs
                _exit([acls.lacks(acls.principal(settings), acls.describe_configs())])
            _exit([f"cannot check the settings against the cluster: {exc.args[0].str()} "
                   "(is the broker running? see KAFKA_BOOTSTRAP_SERVERS)"])
        except TimeoutError:
            _exit(["cannot check the settings against the cluster: timed out "
                   "(is the broker running? see KAFKA_BOOTSTRAP_SERVERS)"])
        if found:
            _exit(found)
        super().execute_from_commandline()
