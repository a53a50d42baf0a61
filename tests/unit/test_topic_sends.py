"""faust_eos.Topic: a send is encoded as Faust encodes it and staged with its event at once, under both guarantees.

A worker app's transaction manager, started without a broker (nothing is
produced); the record's commit is played by calling its staged callback.
"""
from __future__ import annotations

import asyncio
from typing import Any

import faust
from aiokafka.structs import RecordMetadata
from faust.types import TP

import faust_eos
from faust_contract_support import worker_app
from faust_eos.staging import SourceTP, resolve
from store_support import inside_event


class Total(faust.Record, serializer="json"):
    merchant_id: str
    cents: int


class RecordingSensor(faust.Sensor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        self.seen.append(("initiated", topic, message.key, keysize, valsize))
        return "state"

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        self.seen.append(("completed", state, metadata.offset))


def test_a_send_inside_an_event_is_staged_with_it_as_faust_encodes_it_and_faust_sensors_see_it_through():
    async def scenario() -> None:
        app = worker_app(Topic=faust_eos.Topic)
        sensor = RecordingSensor()
        app.sensors.add(sensor)
        transactions = app.consumer.transactions
        await transactions.start()
        try:
            topic = app.topic("totals", key_type=str, value_type=Total)
            with inside_event(offset=7, partition=2):
                committed = await topic.send(key="m1", value=Total("m1", 5), partition=4)
            [record] = transactions.staging.take(SourceTP("payments", 2), up_to_offset=8)
            as_faust_sends_it = faust.Topic(app, topics=["totals"], key_type=str, value_type=Total)
            expected = as_faust_sends_it.as_future_message(key="m1", value=Total("m1", 5)).message
            assert (record.topic, record.partition, record.source_offset) == ("totals", 4, 7)
            assert (record.key, record.value) == (expected.key, expected.value)
            assert sensor.seen == [("initiated", "totals", expected.key, len(expected.key), len(expected.value))]
            resolve([record], [RecordMetadata("totals", 4, TP("totals", 4), 31, 0, 0, -1)])  # its transaction commits
            assert (await committed).offset == 31
            await asyncio.sleep(0)  # the future's callbacks run on the loop's next turn
            assert sensor.seen[-1] == ("completed", "state", 31)
        finally:
            await transactions.stop()

    asyncio.run(scenario())


def test_under_at_least_once_a_send_inside_an_event_is_held_with_it_and_outside_events_takes_faust_s_path():
    async def scenario() -> None:
        app = worker_app("at_least_once", Topic=faust_eos.Topic)
        topic = app.topic("totals", key_type=str, value_type=Total)
        held = app.consumer.held_sends
        try:
            with inside_event(offset=7, partition=2):
                committed = await topic.send(key="m1", value=Total("m1", 5), partition=4)
            [record] = held.staging.take(SourceTP("payments", 2), up_to_offset=8)
            assert (record.topic, record.partition, record.source_offset) == ("totals", 4, 7)
            resolve([record], [RecordMetadata("totals", 4, TP("totals", 4), 31, 0, 0, -1)])  # its offset commits
            assert (await committed).offset == 31
            assert app.consumer.staging_for_sends() is None  # outside any event: sent at once, Faust's way
        finally:
            held.close()

    asyncio.run(scenario())


def test_a_batches_topic_buffers_as_many_records_as_faust_buffers_events_unless_given_its_own_maxsize():
    app = worker_app(Topic=faust_eos.Topic, stream_buffer_maxsize=4096)
    batched = app.topic("payments", schema=faust_eos.Batches(value_type=bytes, max_records=100))
    assert batched.maxsize == 40 and batched.clone(is_iterator=True).maxsize == 40
    # (Faust's app.topic() drops a maxsize argument: the class takes it)
    assert faust_eos.Topic(app, topics=["payments"], schema=faust_eos.Batches(value_type=bytes), maxsize=7).maxsize == 7
    assert app.topic("refunds", value_type=bytes).maxsize is None  # Faust's default, stream_buffer_maxsize
