"""Ordinary streams on eos://: a topic's fetched batch reaches them as one event per record, decoded as Faust decodes.

Records are as aiokafka fetches them; the consumer and the topics are a worker
app's, never started; no broker.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from typing import Any

import faust
from faust.types import TP
from faust_contract_support import fetched_batch, record, worker_app

import faust_eos
from faust_eos.consuming.delivery import Delivery
from faust_eos.short_paths.batches import DEFAULT_MAX_RECORDS, Batch, batch_records, batched_topics
from faust_eos.short_paths.unpacking import first_record_not_done

PAYMENTS = TP("payments", 3)


class Payment(faust.Record, serializer="json"):
    merchant: str
    cents: int


class OwnTopic(faust.Topic):
    """A topic class of the app's own: it takes records one by one."""


def fetched(*values: bytes, first_offset: int = 40) -> list:
    return fetched_batch(PAYMENTS, *values, first_offset=first_offset)


def started_worker() -> Any:
    """A worker app whose consumer is made, as when the worker starts: the app is adopted."""
    app = worker_app()
    assert app.consumer is not None
    return app


async def batch_event(app: Any, topic: Any, *values: bytes) -> Any:
    """The event Faust's conductor puts in ``topic``'s queue for one fetched batch of ``values``."""
    [condensed] = batch_records(fetched(*values), 100)
    message = app.consumer._to_message(PAYMENTS, condensed)
    message.incref(1)  # as the conductor does, once per subscribed channel
    return await topic.decode(message, propagate=True)


def test_a_batch_comes_out_of_the_queue_as_an_event_per_record_as_faust_decodes_each_record():
    async def scenario() -> None:
        app = started_worker()
        topic = app.topic("payments", key_type=str, value_type=Payment)
        assert isinstance(topic, faust_eos.Topic) and topic.unpacks_batches()  # adopted as the worker starts
        values = (b'{"merchant": "m0", "cents": 5}', b'{"merchant": "m1", "cents": 7}')
        event = await batch_event(app, topic, *values)
        assert isinstance(event.value, Batch)
        topic.queue.put_nowait(event)
        assert topic.queue.qsize() == 2
        unpacked = [topic.queue.get_nowait() for _ in values]

        as_faust = faust.Topic(app, topics=["payments"], key_type=str, value_type=Payment)
        for got, fetched_record in zip(unpacked, fetched(*values)):
            want = await as_faust.decode(app.consumer._to_message(PAYMENTS, fetched_record), propagate=True)
            assert (got.key, got.value, got.headers) == (want.key, want.value, want.headers)
            assert ([getattr(got.message, name)
                     for name in ("topic", "partition", "offset", "timestamp", "key", "value")]
                    == [getattr(want.message, name)
                        for name in ("topic", "partition", "offset", "timestamp", "key", "value")])
            assert got.message.tp == PAYMENTS and got.message.generation_id == want.message.generation_id

    asyncio.run(scenario())


def test_the_batch_is_acknowledged_once_every_one_of_its_records_is_however_each_is_acknowledged():
    async def scenario() -> None:
        app = started_worker()
        topic = app.topic("payments", key_type=str, value_type=Payment)
        event = await batch_event(app, topic, *[b'{"merchant": "m", "cents": 1}'] * 3)
        topic.queue.put_nowait(event)
        first, second, third = (topic.queue.get_nowait() for _ in range(3))
        first.ack()  # by a stream, the way Faust's pure-Python stream and take() acknowledge
        second.message.acked = True  # the way Faust's compiled stream acknowledges: by setting it
        assert not event.message.acked  # a commit may not pass the batch while a record is not done
        third.ack()
        assert event.message.acked

    asyncio.run(scenario())


class AuditedEvent(faust.Event):
    """An app's own event class (Faust's ``Event`` setting)."""


def event_class_of_a_record(app: Any) -> type:
    """The class of the event a record of a fetched batch becomes in ``app``'s worker."""
    async def scenario() -> type:
        app.in_worker = True
        assert app.consumer is not None
        topic = app.topic("payments", key_type=str, value_type=Payment)
        topic.queue.put_nowait(await batch_event(app, topic, b'{"merchant": "m", "cents": 1}'))
        return type(topic.queue.get_nowait())

    return asyncio.run(scenario())


def test_records_become_events_of_the_app_s_own_event_class():
    assert event_class_of_a_record(worker_app(Event=AuditedEvent)) is AuditedEvent


def test_records_become_events_made_by_the_app_s_own_create_event():
    class AuditingApp(faust.App):
        def create_event(self, key: Any, value: Any, headers: Any, message: Any) -> Any:
            return AuditedEvent(self, key, value, headers, message)

    app = AuditingApp("contract", broker="eos://localhost:9092", processing_guarantee="exactly_once")
    assert event_class_of_a_record(app) is AuditedEvent


def test_an_acknowledged_record_is_no_longer_waited_for_and_counts_towards_commit_every():
    async def scenario() -> None:
        app = started_worker()
        consumer = app.consumer
        topic = app.topic("payments", key_type=str, value_type=Payment)
        event = await batch_event(app, topic, b'{"merchant": "m", "cents": 1}')
        topic.queue.put_nowait(event)
        record_event = topic.queue.get_nowait()
        consumer.track_message(record_event.message)  # as a stream does when it takes the event
        assert record_event.message in consumer._unacked_messages
        assert record_event.ack() is True  # each channel has records of its own: its stream's ack is the last
        assert record_event.message not in consumer._unacked_messages  # a hand-over waits no more for it
        assert consumer._n_acked == 1  # Faust's broker_commit_every counts it
        assert list(consumer._acked[PAYMENTS]) == []  # its batch's progress decides the commit, not these
        assert event.message.acked
        assert record_event.ack() is False  # once only

    asyncio.run(scenario())


def test_a_record_that_cannot_be_decoded_is_logged_and_skipped_and_does_not_hold_its_batch_back(caplog):
    async def scenario() -> None:
        app = started_worker()
        topic = app.topic("payments", key_type=str, value_type=Payment)
        event = await batch_event(app, topic, b'{"merchant": "m", "cents": 1}', b"not json")
        with caplog.at_level(logging.ERROR):
            topic.queue.put_nowait(event)
        assert "payments[3]@41, which cannot be decoded" in caplog.text
        [only] = [topic.queue.get_nowait() for _ in range(topic.queue.qsize())]
        only.ack()
        assert event.message.acked

    asyncio.run(scenario())


def test_topics_are_fetched_in_batches_when_every_channel_of_theirs_unpacks_them():
    app = started_worker()
    channels = [app.topic("payments", value_type=bytes), app.topic("payments", value_type=Payment),
                app.topic("refunds", value_type=bytes), OwnTopic(app, topics=["refunds"]),
                app.topic("orders", schema=faust_eos.Batches(value_type=bytes, max_records=7))]
    assert batched_topics(channels) == {"payments": DEFAULT_MAX_RECORDS, "refunds": None, "orders": 7}


def test_the_consumer_hands_out_an_adopted_topic_in_batches():
    app = started_worker()
    app.topics.add(app.topic("payments", value_type=bytes))
    condensed = app.consumer._condensed({PAYMENTS: fetched(*[b"p"] * 4)})
    assert [(r.value.first_offset, r.offset) for r in condensed[PAYMENTS]] == [(40, 43)]


def test_a_plain_event_goes_through_an_unpacking_queue_unchanged():
    async def scenario() -> None:
        app = started_worker()
        topic = app.topic("payments", value_type=bytes, value_serializer="raw")
        event = await topic.decode(app.consumer._to_message(PAYMENTS, fetched(b"x")[0]), propagate=True)
        topic.queue.put_nowait(event)
        assert topic.queue.get_nowait() is event

    asyncio.run(scenario())


def test_a_table_s_changelog_is_never_handed_out_in_batches_for_its_recovery_takes_records_one_by_one():
    app = started_worker()
    table = app.Table("totals", default=int)
    changelog = TP(table.changelog_topic.get_topic_name(), 3)
    app.topics.add(table.changelog_topic)
    condensed = app.consumer._condensed({changelog: [record(7, changelog)]})
    assert [(r.offset, r.value) for r in condensed[changelog]] == [(7, b"v")]


def test_until_a_batch_is_done_a_commit_reaches_its_first_record_a_stream_is_not_done_with():
    async def scenario() -> None:
        app = started_worker()
        topic = app.topic("payments", key_type=str, value_type=Payment)
        event = await batch_event(app, topic, *[b'{"merchant": "m", "cents": 1}'] * 3)  # offsets 40 to 42
        delivery = Delivery()
        delivery.position(PAYMENTS, 40)
        delivery.fetched({PAYMENTS: fetched(*[b"p"] * 3)}, delivery.fetch_started())
        assert delivery.admit(PAYMENTS, event.message, first_offset=40)
        topic.queue.put_nowait(event)
        first, second, third = (topic.queue.get_nowait() for _ in range(3))
        assert delivery.committable(PAYMENTS) == 40
        second.ack()
        assert delivery.committable(PAYMENTS) == 40  # the first record is not done: nothing after it commits
        first.ack()
        assert delivery.committable(PAYMENTS) == 42  # the first two commit, with what they caused
        third.ack()
        assert delivery.committable(PAYMENTS) == 43 and event.message.acked

    asyncio.run(scenario())


def test_a_batch_two_channels_unpack_commits_as_far_as_the_channel_that_is_behind():
    async def scenario() -> None:
        app = started_worker()
        fast, slow = (app.topic("payments", key_type=str, value_type=Payment) for _ in range(2))
        message = app.consumer._to_message(PAYMENTS, batch_records(fetched(*[b'{"merchant": "m", "cents": 1}'] * 2),
                                                                  100)[0])
        message.incref(2)  # as the conductor does, once per subscribed channel
        for channel in (fast, slow):
            channel.queue.put_nowait(await channel.decode(message, propagate=True))
        for _ in range(2):
            fast.queue.get_nowait().ack()
        slow.queue.get_nowait().ack()
        assert first_record_not_done(message) == 41 and not message.acked
        slow.queue.get_nowait().ack()
        assert first_record_not_done(message) is None and message.acked

    asyncio.run(scenario())


def test_once_every_record_of_a_batch_is_done_nothing_of_the_library_keeps_the_batch_alive():
    # a long-running worker must not keep every batch it ever fetched, with its records
    async def scenario() -> tuple[weakref.ref, weakref.ref]:
        app = started_worker()
        topic = app.topic("payments", key_type=str, value_type=Payment)
        event = await batch_event(app, topic, b'{"merchant": "m", "cents": 1}', b'{"merchant": "m", "cents": 2}')
        topic.queue.put_nowait(event)
        for _ in range(2):
            topic.queue.get_nowait().ack()
        assert event.message.acked
        return weakref.ref(event.message), weakref.ref(event.message.value)

    message, batch = asyncio.run(scenario())
    gc.collect()
    assert message() is None and batch() is None
