"""Topics on a live cluster: which exist, with how many partitions, and creating the missing ones."""
from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class TopicRefused:
    """A topic the cluster would not create, with its error name (e.g. TOPIC_AUTHORIZATION_FAILED)."""

    topic: str
    error: str
    reason: str


def partition_counts(admin: AdminClient, topics: list[str], timeout_s: float = 30.0) -> dict[str, int]:
    """The partition count of each of ``topics`` that exists."""
    existing = admin.list_topics(timeout=timeout_s).topics
    return {t: len(existing[t].partitions) for t in topics if t in existing and existing[t].error is None}


def create_topics(admin: AdminClient, topics: list[str], partitions: int, replication_factor: int,
                  timeout_s: float = 30.0) -> list[TopicRefused]:
    """Create ``topics``; return those the cluster refused (one created meanwhile by someone else is not)."""
    if not topics:
        return []
    requests = [NewTopic(t, num_partitions=partitions, replication_factor=replication_factor) for t in topics]
    refused = []
    for topic, future in admin.create_topics(requests, operation_timeout=timeout_s, request_timeout=timeout_s).items():
        try:
            future.result()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                refused.append(TopicRefused(topic, error.name(), error.str()))
    return sorted(refused, key=lambda r: r.topic)
