"""faust_eos.Topic: a send is encoded as Faust encodes it and staged with its event at once, under both guarantees.

A worker app's transaction manager, started without a broker (nothing is
produced); the record's commit is played by calling its staged callback.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator

import faust
import pytest
from aiokafka.structs import RecordMetadata
from faust.types import TP
from faust_contract_support import worker_app
from store_support import inside_event

import faust_eos
from faust_eos.state.staging import SourceTP, resolve


class Total(faust.Record, serializer="json"):
    merchant_id: str
    cents: int


@contextlib.asynccontextmanager
async def started(app: Any) -> AsyncIterator[Any]:
    """The worker app's transaction manager, started (without a broker, nothing is produced) and stopped after."""
    transactions = app.consumer.transactions
    await transactions.start()
    try:
        yield transactions
    finally:
        await transactions.stop()


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
        async with started(app) as transactions:
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

    asyncio.run(scenario())


def test_under_at_least_once_a_send_inside_an_event_is_held_with_it_and_outside_events_takes_faust_s_path():
    async def scenario() -> None:
        app = worker_app("at_least_once", Topic=faust_eos.Topic)
        topic = app.topic("totals", key_type=str, value_type=Total)
        held = app.consumer.guarantee
        try:
            with inside_event(offset=7, partition=2):
                committed = await topic.send(key="m1", value=Total("m1", 5), partition=4)
            [record] = held.staging.take(SourceTP("payments", 2), up_to_offset=8)
            assert (record.topic, record.partition, record.source_offset) == ("totals", 4, 7)
            resolve([record], [RecordMetadata("totals", 4, TP("totals", 4), 31, 0, 0, -1)])  # its offset commits
            assert (await committed).offset == 31
            assert app.consumer.staging_for_sends() is None  # outside any event: sent at once, Faust's way
        finally:
            await held.stop()

    asyncio.run(scenario())


def test_plain_sends_of_one_topic_from_different_events_each_go_with_their_own_event_and_faust_s_monitor_counts_them():
    async def scenario() -> None:
        app = worker_app(Topic=faust_eos.Topic)
        monitor = faust.Monitor()
        app.sensors.add(monitor)
        async with started(app) as transactions:
            topic = app.topic("totals", key_type=str, value_type=Total)
            with inside_event(offset=7, partition=2):
                first = await topic.send(key="m1", value=Total("m1", 5), timestamp=1.5)
            with inside_event(offset=3, partition=1):
                second = await topic.send(key="m2", value=Total("m2", 6), partition=0)
            [from_first] = transactions.staging.take(SourceTP("payments", 2), up_to_offset=8)
            [from_second] = transactions.staging.take(SourceTP("payments", 1), up_to_offset=4)
            expected = faust.Topic(app, topics=["totals"], key_type=str, value_type=Total).as_future_message(
                key="m2", value=Total("m2", 6)).message
            assert "_plain_sends" in vars(topic)  # both took the short path
            assert (from_first.source_offset, from_first.partition, from_first.timestamp_ms) == (7, None, 1500)
            assert (from_second.source_offset, from_second.partition, from_second.timestamp_ms) == (3, 0, None)
            assert (from_second.topic, from_second.key, from_second.value) == ("totals", expected.key, expected.value)
            assert monitor.messages_sent == 2 and monitor.messages_sent_by_topic["totals"] == 2
            resolve([from_first, from_second], [RecordMetadata("totals", p, TP("totals", p), 40 + p, 0, 0, -1)
                                                for p in (3, 0)])
            assert ((await first).offset, (await second).offset) == (43, 40)
            assert len(monitor.send_latency) == 2  # each completion reached the monitor

    asyncio.run(scenario())


def test_what_a_send_returns_is_refused_inside_its_event_and_resolves_with_its_commit_however_it_is_waited_for():
    async def scenario() -> None:
        app = worker_app(Topic=faust_eos.Topic)
        async with started(app) as transactions:
            topic = app.topic("totals", key_type=str, value_type=Total)
            called_back: list[int] = []
            with inside_event(offset=7, partition=2):
                sent = await topic.send(key="m1", value=Total("m1", 5))
                with pytest.raises(faust_eos.SendNotCommittable, match="waiting for a record sent"):
                    # the commit waits for this event to end: it would wait for ever (the timeout only ends a hang)
                    await asyncio.wait_for(wait_for(sent), timeout=10)
                sent.add_done_callback(lambda future: called_back.append(future.result().offset))
            waiter = asyncio.ensure_future(wait_for(sent))  # outside the event, it waits for the commit
            await asyncio.sleep(0)
            assert not sent.done() and not waiter.done()
            with pytest.raises(asyncio.InvalidStateError):
                sent.result()
            [record] = transactions.staging.take(SourceTP("payments", 2), up_to_offset=8)
            assert record.needs_metadata()  # waited for: its offset is asked of the producer
            resolve([record], [RecordMetadata("totals", 4, TP("totals", 4), 31, 0, 0, -1)])
            assert sent.done() and sent.result().offset == 31
            assert (await waiter).offset == 31
            [gathered] = await asyncio.gather(sent)  # as a future, it can be gathered (hashed) and waited on
            assert gathered.offset == 31
            done, _ = await asyncio.wait({sent})
            assert done == {sent}
            await asyncio.sleep(0)
            assert called_back == [31]

    asyncio.run(scenario())


async def wait_for(sent: Any) -> RecordMetadata:
    return await sent


class Refund(faust.Record, serializer="json"):
    merchant_id: str


def test_a_plain_send_encodes_as_its_topic_s_schema_says_after_faust_changed_that_schema_in_place():
    async def scenario() -> None:
        app = worker_app(Topic=faust_eos.Topic)
        async with started(app) as transactions:
            topic = app.topic("totals", key_type=str, value_type=Total)
            with inside_event(offset=7, partition=2):
                await topic.send(key="m1", value=Total("m1", 5))
                # deriving a topic updates the schema both share
                topic.derive(topics=["refunds"], value_type=Refund, value_serializer="raw")
                await topic.send(key="m1", value="as is")
            before, after = transactions.staging.take(SourceTP("payments", 2), up_to_offset=8)
            assert before.value == Total("m1", 5).dumps()
            assert after.value == b"as is" == app.serializers.dumps_value(Refund, "as is", serializer="raw")

    asyncio.run(scenario())


def test_a_send_to_a_table_s_changelog_inside_an_event_is_refused(tmp_path):
    async def scenario() -> None:
        app = worker_app(Topic=faust_eos.Topic, store="eos-rocksdb://", tabledir=tmp_path)
        app.Table("counts", default=int)
        async with started(app) as transactions:
            changelog = app.topic(f"{app.conf.id}-counts-changelog", key_type=str, value_type=int)
            with inside_event(offset=7, partition=2):
                with pytest.raises(faust_eos.SendNotCommittable, match="write to the table instead"):
                    await changelog.send(key="m1", value=1)
            assert not transactions.staging.pending()

    asyncio.run(scenario())


def test_a_batches_topic_buffers_as_many_records_as_faust_buffers_events_unless_given_its_own_maxsize():
    app = worker_app(Topic=faust_eos.Topic, stream_buffer_maxsize=4096)
    batched = app.topic("payments", schema=faust_eos.Batches(value_type=bytes, max_records=100))
    assert batched.maxsize == 40 and batched.clone(is_iterator=True).maxsize == 40
    # (Faust's app.topic() drops a maxsize argument: the class takes it)
    assert faust_eos.Topic(app, topics=["payments"], schema=faust_eos.Batches(value_type=bytes), maxsize=7).maxsize == 7
    assert app.topic("refunds", value_type=bytes).maxsize is None  # Faust's default, stream_buffer_maxsize


def test_a_send_through_faust_s_own_topic_asks_for_its_offset_only_when_something_reads_it():
    # Faust wraps every send's future in a callback of its own, which reads no offset: a report per record
    # would cost the producer's thread a turn of the GIL for each
    async def scenario() -> None:
        app = worker_app()  # Faust's own topic class
        called_back: list = []
        async with started(app) as transactions:
            topic = app.topic("totals", key_type=str, value_type=Total)
            with inside_event(offset=7, partition=2):
                plain = await topic.send(key="m1", value=Total("m1", 5))
                with_callback = await topic.send(key="m2", value=Total("m2", 6), callback=called_back.append)
                held = await topic.send(key="m3", value=Total("m3", 7))
            waiter = asyncio.ensure_future(held)  # held by the app past its event, and awaited
            await asyncio.sleep(0)
            records = transactions.staging.take(SourceTP("payments", 2), up_to_offset=8)
            assert [record.needs_metadata() for record in records] == [False, True, True]
            resolve(records, [RecordMetadata("totals", 0, TP("totals", 0), 40 + i, 0, 0, -1) for i in range(3)])
            assert (await waiter).offset == 42
            await asyncio.sleep(0)
            assert [fut.result().offset for fut in called_back] == [41] == [with_callback.result().offset]
            assert plain.done()

    asyncio.run(scenario())
