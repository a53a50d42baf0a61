"""Committed offsets as exactly-once needs them: stable ones.

A committed offset still pending in a transaction (its commit markers not yet
written) is exactly the one that matters on a hand-over, and aiokafka cannot
ask for stable offsets. librdkafka's consumer can: with
``isolation.level=read_committed`` its offset fetch sets ``require_stable``,
and while a transaction holds an offset pending the broker answers
UNSTABLE_OFFSET_COMMIT and the question is asked again.

Blocking: run it in a thread.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Optional, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

T = TypeVar("T")
log = logging.getLogger(__name__)

# Errors that pass once the broker has (re)loaded its partitions and coordinators.
TRANSIENT_CODES = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.UNSTABLE_OFFSET_COMMIT,
}


class CommittedOffsets:
    """Reads a consumer group's stable committed offsets; never joins the group."""

    def __init__(self, bootstrap_servers: str, group_id: str) -> None:
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        })

    def group_metadata(self) -> Any:
        """The group's metadata for ``send_offsets_to_transaction``.

        Fencing follows each partition's transactional id, not the group
        generation, so this carries the group id only.
        """
        return self._consumer.consumer_group_metadata()

    def read(self, tps: Iterable[Any], timeout_s: float = 60.0) -> dict[Any, Optional[int]]:
        """Committed offset of each of ``tps`` (anything with .topic and .partition); None if none."""
        tps = list(tps)

        def ask() -> dict[tuple[str, int], int]:
            result = self._consumer.committed([TopicPartition(tp.topic, tp.partition) for tp in tps], timeout=10)
            for partition in result:
                if partition.error is not None:
                    raise KafkaException(partition.error)
            return {(p.topic, p.partition): p.offset for p in result}

        committed = retrying(ask, timeout_s)
        return {tp: (offset if (offset := committed[(tp.topic, tp.partition)]) >= 0 else None) for tp in tps}

    def last_stable_offsets(self, tps: Iterable[Any], timeout_s: float = 60.0) -> dict[Any, int]:
        """Where read_committed readers of ``tps`` stop now: each partition's LSO."""

        def ask() -> dict[Any, int]:
            return {
                tp: self._consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10, cached=False)[1]
                for tp in tps
            }

        return retrying(ask, timeout_s)

    def close(self) -> None:
        self._consumer.close()


def retrying(ask: Callable[[], T], timeout_s: float) -> T:
    """``ask()`` again while the broker answers with a transient error (e.g. just after a restart)."""
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        try:
            return ask()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            transient = error.retriable() or error.code() in TRANSIENT_CODES
            if time.monotonic() > deadline or not transient:
                raise
            if not told:
                log.info("Broker not ready to answer (%s); asking again for up to %.0f s", error.str(), timeout_s)
                told = True
            time.sleep(0.2)
