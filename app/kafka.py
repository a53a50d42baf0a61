"""The pipeline's confluent-kafka helpers, from its settings: clients and topics."""
from __future__ import annotations

import logging
from typing import Any

from confluent_kafka.admin import AdminClient

from config import Settings
from kafka_ops.topics import create_topics, partition_counts

# librdkafka's own log lines (connection errors and the like) from these clients;
# the fault harness silences it, since restarting the broker is what it does.
CLIENT_LOG = logging.getLogger("faust_eos.kafka_client")


class TopicError(RuntimeError):
    """A topic exists with a layout the pipeline cannot use, or the cluster would not create it."""


def admin(settings: Settings) -> AdminClient:
    return AdminClient(settings.kafka_client())


def pipeline_topics(settings: Settings) -> list[str]:
    """The pipeline's input and output topics."""
    return [settings.input_topic, *settings.output_topics]


def ensure_topics(settings: Settings, topics: list[str] | None = None) -> None:
    """Create ``topics`` (default: the pipeline's) with the pipeline's partitions and replication, if missing."""
    topics = topics or pipeline_topics(settings)
    client = admin(settings)
    existing = partition_counts(client, topics)
    for topic, count in sorted(existing.items()):
        if count != settings.partitions:
            raise TopicError(
                f"topic {topic!r} has {count} partitions, PARTITIONS={settings.partitions}: "
                "set PARTITIONS to match or delete the topic"
            )
    missing = [t for t in topics if t not in existing]
    refused = create_topics(client, missing, settings.partitions, settings.replication_factor)
    if refused:
        raise TopicError("; ".join(f"cannot create topic {r.topic!r}: {r.reason}" for r in refused))


def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """An idempotent producer partitioning keys like the Java client (and Faust)."""
    return {
        **settings.kafka_client(),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "partitioner": "murmur2_random",
        "logger": CLIENT_LOG,
        **extra,
    }


def committed_reader_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """A consumer that sees only committed records and commits nothing."""
    return {
        **settings.kafka_client(),
        "group.id": f"{settings.app_id}-reader",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "logger": CLIENT_LOG,
        **extra,
    }
