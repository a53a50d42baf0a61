"""The high watermark and last stable offset (LSO) of partitions, read one way everywhere.

A partition's end offset is its LSO to a ``read_committed`` reader and its high
watermark to a ``read_uncommitted`` one. :func:`read_offsets` always reads the
LSO first and the high watermark after it: the high watermark only grows, so
the pair it returns has ``high_watermark >= last_stable_offset`` and the LSO lag
(high watermark - LSO, the records ``read_committed`` readers cannot see yet)
is never made up by the order of the reads.

Two ways to ask for end offsets, with the same signature (:data:`EndOffsets`):
:func:`admin_end_offsets` (librdkafka's admin client, ``ListOffsets``: one
request for all partitions) for tools, and :class:`WatermarkReader`
(group-less consumers, one partition at a time) for workers, which must not use
the admin client: its requests crashed the process around broker restarts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

PartitionKey = tuple[str, int]

#: (isolation level, partitions) -> end offset of each partition that answered
EndOffsets = Callable[[str, list[PartitionKey]], dict[PartitionKey, int]]


@dataclass(frozen=True)
class PartitionOffsets:
    topic: str
    partition: int
    high_watermark: int
    last_stable_offset: int

    @property
    def lso_lag(self) -> int:
        """Records read_committed readers cannot see yet: high watermark - LSO."""
        return self.high_watermark - self.last_stable_offset


def read_offsets(end_offsets: EndOffsets, partitions: Iterable[PartitionKey]) -> dict[PartitionKey, PartitionOffsets]:
    """High watermark and LSO of each of ``partitions``: the LSO first, then the high watermark.

    A partition missing from either answer is left out.
    """
    partitions = sorted(set(partitions))
    if not partitions:
        return {}
    stable = end_offsets(READ_COMMITTED, partitions)
    high = end_offsets(READ_UNCOMMITTED, [tp for tp in partitions if tp in stable])
    return {tp: PartitionOffsets(tp[0], tp[1], high[tp], stable[tp]) for tp in partitions if tp in high}


def admin_end_offsets(admin: AdminClient, timeout_s: float) -> EndOffsets:
    """End offsets from ``ListOffsets``; any partition's error raises :class:`KafkaException`."""
    levels = {READ_COMMITTED: IsolationLevel.READ_COMMITTED, READ_UNCOMMITTED: IsolationLevel.READ_UNCOMMITTED}

    def end_offsets(isolation_level: str, partitions: list[PartitionKey]) -> dict[PartitionKey, int]:
        if not partitions:
            return {}
        request = {TopicPartition(topic, partition): OffsetSpec.latest() for topic, partition in partitions}
        futures = admin.list_offsets(request, isolation_level=levels[isolation_level], request_timeout=timeout_s)
        return {(tp.topic, tp.partition): future.result(timeout_s).offset for tp, future in futures.items()}

    return end_offsets


class WatermarkReader:
    """End offsets from consumers that never join their group, one per isolation level.

    Asks partition by partition, each within ``timeout_s``: a partition that
    fails (e.g. its topic is not created yet) is left out, and once one times
    out (the broker is not answering) the rest are not asked.
    """

    def __init__(self, client: Mapping[str, Any], group_id: str, timeout_s: float = 1.0) -> None:
        """``client``: librdkafka settings, at least ``bootstrap.servers``."""
        self.timeout_s = timeout_s
        self._consumers = {
            level: Consumer({**client, "group.id": group_id,
                             "isolation.level": level, "enable.auto.commit": False})
            for level in (READ_COMMITTED, READ_UNCOMMITTED)
        }

    def __call__(self, isolation_level: str, partitions: list[PartitionKey]) -> dict[PartitionKey, int]:
        consumer = self._consumers[isolation_level]
        offsets: dict[PartitionKey, int] = {}
        for topic, partition in partitions:
            try:
                _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout_s,
                                                        cached=False)
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError._TIMED_OUT:
                    break
                continue
            offsets[(topic, partition)] = end
        return offsets

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
