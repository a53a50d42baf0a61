"""The exactly-once commit of one input partition.

One transactional producer per input partition this worker owns, with a
``transactional.id`` derived from the partition (``<app>-<topic>-<partition>``).
Whoever owns the partition next initialises the same id, which aborts any
transaction the previous owner left open and fences it: a paused or partitioned
old owner (a zombie) can no longer commit anything.

A commit is one transaction, run start to finish on a worker thread::

    begin_transaction()
    produce(record) for every staged record the committed events caused
        (outputs and table changelog writes, in the order they were sent)
    flush()                                  every record acknowledged, or abort
    send_offsets_to_transaction({tp: offset}, group)
    commit_transaction()

Nothing is produced outside this sequence, so a transaction is open only for
the few milliseconds of a commit and a crash at any step leaves either all of
it or none of it visible to ``read_committed`` readers.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from aiokafka.structs import RecordMetadata, TopicPartition as AioTopicPartition
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from app import metrics
from app.eos.staging import SourceTP, StagedRecord

log = logging.getLogger(__name__)

FENCED_CODES = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


class ProducerFenced(Exception):
    """Another worker now owns this input partition's transactional id."""


class TransactionFailed(Exception):
    """A transaction could not be committed and was aborted."""


def group_metadata(bootstrap_servers: str, group_id: str) -> Any:
    """Consumer-group metadata for ``send_offsets_to_transaction``.

    Fencing follows the partition's transactional id, not the group
    generation, so the metadata carries the group id only.
    """
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap_servers, "group.id": group_id})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def transactional_id(app_id: str, tp: SourceTP) -> str:
    return f"{app_id}-{tp.topic}-{tp.partition}"


class PartitionTransaction:
    """The transactional producer of one input partition. Blocking: run in a thread."""

    def __init__(self, tp: SourceTP, *, app_id: str, producer_config: dict[str, Any], group: Any) -> None:
        self.tp = tp
        self.transactional_id = transactional_id(app_id, tp)
        self._group = group
        self._timeout_s = producer_config["transaction.timeout.ms"] / 1000
        self._producer = Producer({**producer_config, "transactional.id": self.transactional_id})

    def init(self) -> None:
        """Claim the id: aborts the previous owner's open transaction and fences it."""
        self._producer.init_transactions(self._timeout_s)

    @metrics.commit_duration.time()
    def commit(self, records: Sequence[StagedRecord], offset: int) -> list[RecordMetadata]:
        """Produce ``records`` and commit them with input offset ``offset``, atomically.

        Returns each record's metadata, in order. Raises :class:`ProducerFenced`
        or :class:`TransactionFailed`; in both cases nothing became visible.
        """
        delivered: list[RecordMetadata | None] = [None] * len(records)
        errors: list[KafkaError] = []

        def on_delivery(index: int):
            def report(err: KafkaError | None, msg: Message) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    delivered[index] = _metadata(msg)

            return report

        producer = self._producer
        try:
            producer.begin_transaction()
            metrics.transactions_begun.inc()
            for index, record in enumerate(records):
                kwargs: dict[str, Any] = {"key": record.key, "value": record.value, "on_delivery": on_delivery(index)}
                if record.partition is not None:
                    kwargs["partition"] = record.partition
                if record.timestamp_ms is not None:
                    kwargs["timestamp"] = record.timestamp_ms
                if record.headers:
                    kwargs["headers"] = list(record.headers)
                self._produce(record.topic, kwargs)
            producer.flush(self._timeout_s)
            if errors or any(md is None for md in delivered):
                raise KafkaException(errors[0] if errors else KafkaError(KafkaError._TIMED_OUT))
            offsets = [TopicPartition(self.tp.topic, self.tp.partition, offset)]
            producer.send_offsets_to_transaction(offsets, self._group, self._timeout_s)
            producer.commit_transaction(self._timeout_s)
            metrics.transactions_committed.inc()
        except KafkaException as exc:
            self._fail(exc)
        return delivered  # type: ignore[return-value]

    def _produce(self, topic: str, kwargs: dict[str, Any]) -> None:
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:  # local queue full: let deliveries drain it
                self._producer.poll(0.05)

    def _fail(self, exc: KafkaException) -> None:
        error: KafkaError = exc.args[0]
        if error.code() in FENCED_CODES or error.fatal():
            raise ProducerFenced(f"{self.transactional_id}: {error.str()}") from exc
        try:
            self._producer.abort_transaction(self._timeout_s)
        except KafkaException as abort_exc:
            abort_error: KafkaError = abort_exc.args[0]
            if abort_error.code() in FENCED_CODES or abort_error.fatal():
                raise ProducerFenced(f"{self.transactional_id}: {abort_error.str()}") from abort_exc
            raise TransactionFailed(f"{self.transactional_id}: abort failed: {abort_error.str()}") from abort_exc
        metrics.transactions_aborted.inc()
        raise TransactionFailed(f"{self.transactional_id}: {error.str()} (aborted)") from exc

    def close(self) -> None:
        """Drop the producer; an open transaction is aborted by the next owner."""
        self._producer.flush(0)


def _metadata(msg: Message) -> RecordMetadata:
    tp = AioTopicPartition(msg.topic(), msg.partition())
    timestamp_type, timestamp = msg.timestamp()
    return RecordMetadata(
        topic=msg.topic(),
        partition=msg.partition(),
        topic_partition=tp,
        offset=msg.offset(),
        timestamp=timestamp,
        timestamp_type=timestamp_type,
        log_start_offset=None,
    )
