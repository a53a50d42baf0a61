"""How the group fences a zombie's commit, on the real broker.

A worker commits every partition it owns in one transaction of its own
producer, with its offsets sent as a member of the group's generation
(:func:`faust_eos.committing.transaction.group_metadata`). Once the group has moved on, a
worker that still believes itself the owner must not commit: the broker refuses
its offsets, and its transaction is aborted with every record in it. Offsets
sent with no generation at all are taken from anyone, which is why a worker out
of the group commits nothing (:class:`faust_eos.committing.commit.WorkerCommits`).
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from app.kafka import admin, producer_config
from faust_eos.committing.transaction import TransactionalProducer, TransactionFailed, group_metadata
from faust_eos.state.staging import SourceTP, StagedRecord

pytestmark = pytest.mark.broker


def record(topic: str, value: bytes) -> StagedRecord:
    return StagedRecord(topic=topic, key=b"k", value=value, partition=0, timestamp_ms=None, headers=None,
                        source_offset=0)


def visible(kafka, topic: str) -> list[bytes]:
    """The committed records of ``topic``'s partition 0."""
    reader = Consumer({**kafka.kafka_client(), "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                       "isolation.level": "read_committed", "enable.partition.eof": True})
    reader.assign([TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    try:
        while True:
            message = reader.poll(10)
            assert message is not None, "no end of partition within 10 s"
            if message.error() is not None:
                return seen  # the end of the partition (only that error is asked for)
            seen.append(message.value())
    finally:
        reader.close()


async def committed(consumer: AIOKafkaConsumer, topic: str, want: int) -> int:
    """The group's committed offset of ``topic``'s partition 0, once it is ``want`` or 30 s passed: a
    transaction's offsets show once its commit markers are written."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while (offset := await consumer.committed(AioTopicPartition(topic, 0))) != want and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return offset


def test_only_the_member_of_the_groups_current_generation_commits(kafka):
    name = f"fencing-{uuid.uuid4().hex[:8]}"
    source, output = f"{name}-in", f"{name}-out"
    client = admin(kafka)
    for future in client.create_topics([NewTopic(source, 2, 1), NewTopic(output, 1, 1)],
                                       operation_timeout=30).values():
        future.result()
    producers: list[TransactionalProducer] = []

    async def claimed() -> TransactionalProducer:
        """A new producer of the worker's id, as the next assignment claims after a failed commit."""
        if producers:
            producers[-1].close()
        producers.append(TransactionalProducer(transactional_id=f"{name}-worker-w1",
                                               producer_config=producer_config(kafka), call_timeout_s=10))
        await producers[-1].init()
        return producers[-1]

    def member_of(consumer: AIOKafkaConsumer, generation_back: int = 0) -> bytes:
        coordinator = consumer._coordinator
        return group_metadata(name, coordinator.generation - generation_back, coordinator.member_id)

    async def joined(consumer: AIOKafkaConsumer) -> AIOKafkaConsumer:
        await consumer.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not consumer.assignment() and loop.time() < deadline:
            await consumer.getmany(timeout_ms=100)
        assert consumer.assignment(), "no assignment within 60 s"
        return consumer

    async def scenario() -> None:
        producer = await claimed()
        first = await joined(AIOKafkaConsumer(source, bootstrap_servers=kafka.bootstrap_servers, group_id=name,
                                              enable_auto_commit=False))
        old = member_of(first)
        await producer.commit([record(output, b"owner")], {SourceTP(source, 0): 5}, old)
        assert await committed(first, source, 5) == 5

        # the owner leaves; a new member joins, in a new generation
        await first.stop()
        second = await joined(AIOKafkaConsumer(source, bootstrap_servers=kafka.bootstrap_servers, group_id=name,
                                               enable_auto_commit=False))
        try:
            with pytest.raises(TransactionFailed):  # a zombie: a member the group no longer has
                await producer.commit([record(output, b"zombie")], {SourceTP(source, 0): 9}, old)
            producer = await claimed()
            with pytest.raises(TransactionFailed):  # the current member id, an older generation
                await producer.commit([record(output, b"stale")], {SourceTP(source, 0): 9}, member_of(second, 1))
            producer = await claimed()
            assert await second.committed(AioTopicPartition(source, 0)) == 5
            # why the worker commits nothing while it is out of the group: offsets sent without a
            # generation are taken from anyone
            await producer.commit([record(output, b"anyone")], {SourceTP(source, 0): 7}, group_metadata(name, -1, ""))
            assert await committed(second, source, 7) == 7
            await producer.commit([record(output, b"new owner")], {SourceTP(source, 0): 8}, member_of(second))
            assert await committed(second, source, 8) == 8
        finally:
            await second.stop()

    try:
        asyncio.run(scenario())
    finally:
        producers[-1].close()
    assert visible(kafka, output) == [b"owner", b"anyone", b"new owner"]
