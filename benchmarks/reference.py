"""Reference lines: what the broker and a plain producer manage on the same records, in the same run.

* raw limit: one idempotent confluent-kafka producer, then one consumer,
  alone on the pipeline's input records (no pipeline at all);
* idempotent vs transactional: the same producer and records, committing a
  transaction every commit interval, or every N records (the size of the
  pipeline's own transactions).
"""
from __future__ import annotations

import itertools
import time
import uuid
from typing import Optional

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from app import loadgen
from app.kafka import admin, producer_config
from config import Settings


def sample_records(record_bytes: int, count: int, seed: int) -> list[loadgen.Record]:
    """The input records the pipeline gets (same generator, same mix), to replay."""
    return list(loadgen.generate(loadgen.LoadSpec(count=count, seed=seed, record_bytes=record_bytes)))


class ScratchTopic:
    """A fresh topic, deleted on exit."""

    def __init__(self, settings: Settings, partitions: int) -> None:
        self.settings = settings
        self.name = f"bench-ref-{uuid.uuid4().hex[:8]}"
        self.partitions = partitions
        self._admin = admin(settings)  # kept: its futures fail if the client is collected

    def __enter__(self) -> str:
        future = self._admin.create_topics([NewTopic(self.name, self.partitions, 1)], operation_timeout=30)
        future[self.name].result()
        return self.name

    def __exit__(self, *_exc) -> None:
        for future in self._admin.delete_topics([self.name], operation_timeout=30).values():
            try:
                future.result()
            except Exception:
                pass


def producer_rate(settings: Settings, records: list[loadgen.Record], partitions: int, seconds: float, *,
                  transaction_ms: Optional[int] = None, transaction_records: Optional[int] = None,
                  read_back: bool = False) -> dict:
    """Records/s of one producer replaying ``records`` for ``seconds`` (the last flush or commit included).

    Idempotent by default; transactional when ``transaction_ms`` (commit every so
    many ms) or ``transaction_records`` (commit every so many records) is given.
    With ``read_back``, a consumer alone then reads everything back: the raw limit.
    """
    failures: list[str] = []

    def on_failure(err, _msg) -> None:
        failures.append(err.str())

    transactional = transaction_ms is not None or transaction_records is not None
    config = producer_config(settings, **{"delivery.report.only.error": True, "on_delivery": on_failure})
    if transactional:
        config.update({"transactional.id": f"bench-ref-{uuid.uuid4().hex[:8]}", "transaction.timeout.ms": 60_000})
    chunk = min(200, transaction_records or 200)
    with ScratchTopic(settings, partitions) as topic:
        producer = Producer(config)
        if transactional:
            producer.init_transactions(30)
        _warm_up(producer, topic, records[0], transactional)
        sent = transactions = 0
        source = itertools.cycle(records)
        started = time.monotonic()
        end = started + seconds
        while time.monotonic() < end:
            if transactional:
                producer.begin_transaction()
            batch_end = min(end, time.monotonic() + transaction_ms / 1000) if transaction_ms else end
            in_batch = 0
            while True:
                for _ in range(chunk):
                    _produce(producer, topic, next(source))
                in_batch += chunk
                if time.monotonic() >= batch_end or (transaction_records and in_batch >= transaction_records):
                    break
            sent += in_batch
            if transactional:
                producer.commit_transaction(60)
                transactions += 1
        if producer.flush(60):
            raise RuntimeError("producer: records not acknowledged")
        elapsed = time.monotonic() - started
        if failures:
            raise RuntimeError(f"producer: {len(failures)} records failed, e.g. {failures[0]}")
        result = {"records": sent, "records_per_s": sent / elapsed, "transactions": transactions,
                  "records_per_transaction": sent / transactions if transactions else None,
                  "transaction_ms": transaction_ms, "transaction_records": transaction_records}
        if read_back:
            result["consumer_records_per_s"] = _read_back(settings, topic, partitions, sent + 1)
    return result


def _warm_up(producer: Producer, topic: str, record: loadgen.Record, transactional: bool) -> None:
    """One record delivered before the clock starts: connections and metadata are not measured."""
    if transactional:
        producer.begin_transaction()
    _produce(producer, topic, record)
    if transactional:
        producer.commit_transaction(30)
    producer.flush(30)


def _read_back(settings: Settings, topic: str, partitions: int, expected: int) -> float:
    """Records/s of a consumer alone reading ``topic`` from the start to its end."""
    consumer = Consumer({
        **settings.kafka_client(),
        "group.id": f"{topic}-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        started = time.monotonic()
        read, pending = 0, set(range(partitions))
        while pending:
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise RuntimeError(f"raw consumer: {msg.error().str()}")
                read += 1
            if time.monotonic() - started > 300:
                raise TimeoutError("raw consumer did not reach the end")
        elapsed = time.monotonic() - started
    finally:
        consumer.close()
    if read != expected:
        raise RuntimeError(f"raw consumer read {read:,} of {expected:,} records")
    return read / elapsed


def _produce(producer: Producer, topic: str, record: loadgen.Record) -> None:
    while True:
        try:
            producer.produce(topic, key=record.key, value=record.value)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.05)
