"""Support for the transaction tests on the real broker: the operator's commands, and a stalled transaction."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

import config
from app.kafka import admin, committed_reader_config, producer_config
from config import REPO_ROOT

STALLED_RECORDS = 5
COMMAND_TIMEOUT_S = 180  # bounds a hang on a busy machine; not a timing check


def faust(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    """``faust -A app <args>`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "faust", "-A", "app", *args],
        cwd=REPO_ROOT, env=env or config.child_env(), input=stdin, capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def faust_json(*args: str) -> list[dict]:
    result = faust("--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def create_topic(settings: config.Settings, name: str, partitions: int) -> None:
    client = admin(settings)
    for future in client.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        future.result()


def read_committed(settings: config.Settings, topic: str, partition: int) -> list[bytes]:
    """Every record a read_committed reader sees on one partition, from the start."""
    consumer = Consumer(committed_reader_config(settings, **{"group.id": f"reader-{uuid.uuid4().hex}"}))
    consumer.assign([TopicPartition(topic, partition, 0)])
    values = []
    try:
        while True:
            message = consumer.poll(30)
            assert message is not None, "the reader got neither records nor the end of the partition"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return values
            values.append(message.value())
    finally:
        consumer.close()


class Stalled:
    """A transactional producer that began a transaction, wrote to partition 0, and stalled."""

    def __init__(self, settings: config.Settings, topic: str) -> None:
        self.topic = topic
        self.transactional_id = f"stalled-{uuid.uuid4().hex[:8]}"
        self.config = {"bootstrap.servers": settings.bootstrap_servers, "transactional.id": self.transactional_id,
                       "transaction.timeout.ms": 600_000}  # long: the coordinator must not end it first
        self.producer = Producer(self.config)
        self.producer.init_transactions(60)
        self.producer.begin_transaction()
        for i in range(STALLED_RECORDS):
            self.producer.produce(topic, key=b"k", value=b"uncommitted-%d" % i, partition=0)
        assert self.producer.flush(60) == 0

    def release(self) -> None:
        """Abort the transaction if a test left it open (a new session with the id does that)."""
        Producer({**self.config, "log_level": 3}).init_transactions(60)


def committed_after(settings: config.Settings, topic: str) -> None:
    """Write one committed record after the stalled ones."""
    producer = Producer(producer_config(settings))
    producer.produce(topic, key=b"k", value=b"committed", partition=0)
    assert producer.flush(60) == 0
