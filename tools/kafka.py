"""Small confluent-kafka helpers shared by the tools: topics and clients."""
from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from config import Settings


# librdkafka's own log lines (connection errors and the like) from the tools' clients;
# the fault harness silences it, since restarting the broker is what it does.
CLIENT_LOG = logging.getLogger("faust_eos.kafka_client")


class TopicError(RuntimeError):
    """A topic exists with a layout the pipeline cannot use."""


def admin(settings: Settings) -> AdminClient:
    return AdminClient({"bootstrap.servers": settings.bootstrap_servers})


def pipeline_topics(settings: Settings) -> list[str]:
    return [settings.input_topic, *settings.output_topics]


def ensure_topics(settings: Settings, topics: list[str] | None = None) -> None:
    """Create the pipeline's topics with ``settings.partitions`` partitions, if missing."""
    topics = topics or pipeline_topics(settings)
    client = admin(settings)
    existing = client.list_topics(timeout=30).topics
    missing = [NewTopic(t, num_partitions=settings.partitions, replication_factor=1) for t in topics if t not in existing]
    for topic in topics:
        if topic in existing and len(existing[topic].partitions) != settings.partitions:
            raise TopicError(
                f"topic {topic!r} has {len(existing[topic].partitions)} partitions, PARTITIONS="
                f"{settings.partitions}: set PARTITIONS to match or delete the topic"
            )
    for topic, future in (client.create_topics(missing, operation_timeout=30) if missing else {}).items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != exc.args[0].TOPIC_ALREADY_EXISTS:
                raise


def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """An idempotent producer partitioning keys like the Java client (and Faust)."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
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
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": f"{settings.app_id}-reader",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "logger": CLIENT_LOG,
        **extra,
    }
