"""Offsets as ``read_committed`` consumers see them, asked of the broker directly.

Faust's own view of these (from aiokafka) can be stale right after a
rebalance; exactly-once needs the broker's answer. All functions block.
"""
from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec


def stable_committed_offsets(admin: AdminClient, group_id: str, tps: list, timeout_s: float = 60.0) -> dict:
    """Committed offsets of ``tps`` (None where nothing is committed), read with
    ``require_stable``: the broker answers only once no open transaction holds
    offsets of these partitions pending. Blocking."""
    request = [ConsumerGroupTopicPartitions(group_id, [TopicPartition(tp.topic, tp.partition) for tp in tps])]
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = admin.list_consumer_group_offsets(request, require_stable=True)[group_id].result()
            break
        except KafkaException as exc:
            if time.monotonic() > deadline or not exc.args[0].retriable():
                raise
            time.sleep(0.1)
    committed = {(p.topic, p.partition): p.offset for p in result.topic_partitions}
    return {tp: (committed[(tp.topic, tp.partition)] if committed[(tp.topic, tp.partition)] >= 0 else None) for tp in tps}


def last_stable_offsets(admin: AdminClient, tps: list, timeout_s: float = 30.0) -> dict:
    """The last stable offset of each of ``tps``. Blocking."""
    request = {TopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in tps}
    futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout_s)
    offsets = {(key.topic, key.partition): future.result().offset for key, future in futures.items()}
    return {tp: offsets[(tp.topic, tp.partition)] for tp in tps}
