"""Batches: a topic with the Batches schema reaches its agents one fetched batch per event.

Records are as aiokafka fetches them; the consumer and the topics are a
worker app's, never started; no broker.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
import pytest
from faust.types import TP
from faust_contract_support import fetched_batch, record, worker_app

from faust_eos import Batch, Batches, SettingRefused
from faust_eos.consuming.consumer import Consumer
from faust_eos.short_paths.batches import batch_records, batched_topics


class Payment(faust.Record, serializer="json"):
    merchant: str
    cents: int


PAYMENTS = TP("payments", 3)


def fetched(*values: bytes, first_offset: int = 40) -> list:
    return fetched_batch(PAYMENTS, *values, first_offset=first_offset)


def as_message(fetched_record: Any) -> Any:
    """The fetched record as Faust's aiokafka consumer hands it to the conductor."""
    return worker_app().consumer._to_message(PAYMENTS, fetched_record)


def test_a_fetched_batch_becomes_records_of_at_most_max_records_each_past_their_last_offset():
    records = fetched(*[b"{}"] * 5)
    condensed = batch_records(records, max_records=2)
    assert ([(r.offset, r.value.first_offset, len(r.value)) for r in condensed]
            == [(41, 40, 2), (43, 42, 2), (44, 44, 1)])
    assert all(r.topic == PAYMENTS.topic and r.partition == PAYMENTS.partition for r in condensed)


def test_the_topics_schema_decodes_each_record_which_keeps_where_it_came_from():
    async def scenario() -> None:
        app = worker_app()
        topic = app.topic("payments", schema=Batches(key_type=str, value_type=Payment))
        [condensed] = batch_records(fetched(b'{"merchant": "m0", "cents": 5}', b'{"merchant": "m1", "cents": 7}'), 100)
        event = await topic.decode(as_message(condensed), propagate=True)  # as Faust's conductor decodes
        assert isinstance(event.value, Batch) and event.message.offset == 41
        first, second = list(event.value)
        assert (first.key, first.value, second.value.cents) == ("m0", Payment("m0", 5), 7)
        assert (second.topic, second.partition, second.offset, second.timestamp) == ("payments", 3, 41, 1.001)
        assert second.headers == [("h", b"1")]
        assert (second.raw_key, second.raw_value) == (b"m1", b'{"merchant": "m1", "cents": 7}')

    asyncio.run(scenario())


def test_a_record_that_cannot_be_decoded_is_logged_and_skipped_and_the_others_are_handed_out(caplog):
    async def scenario() -> list:
        app = worker_app()
        topic = app.topic("payments", schema=Batches(key_type=str, value_type=Payment))
        [condensed] = batch_records(fetched(b'{"merchant": "m0", "cents": 5}', b"not json", b'{"merchant": "m2", '
                                            b'"cents": 1}'), 100)
        event = await topic.decode(as_message(condensed), propagate=True)
        return [r.offset for r in event.value]

    with caplog.at_level(logging.ERROR, logger="faust_eos.short_paths.batches"):
        assert asyncio.run(scenario()) == [40, 42]
    assert "payments[3]@41" in caplog.text


def test_agents_of_one_topic_with_other_types_each_decode_the_batch_their_way():
    async def scenario() -> None:
        app = worker_app()
        as_payments = app.topic("payments", schema=Batches(key_type=str, value_type=Payment))
        as_bytes = app.topic("payments", schema=Batches(key_type=bytes, value_type=bytes, key_serializer="raw",
                                                        value_serializer="raw"))
        message = as_message(batch_records(fetched(b'{"merchant": "m0", "cents": 5}'), 100)[0])
        payments, raw = (await as_payments.decode(message, propagate=True),
                         await as_bytes.decode(message, propagate=True))
        assert [r.value for r in payments.value] == [Payment("m0", 5)]
        assert [r.value for r in raw.value] == [b'{"merchant": "m0", "cents": 5}']

    asyncio.run(scenario())


def test_a_tombstone_in_a_topic_that_allows_empty_values_is_handed_out_with_no_value():
    async def scenario() -> list:
        topic = worker_app().topic("payments", schema=Batches(key_type=str, value_type=Payment), allow_empty=True)
        [condensed] = batch_records(fetched(None, b'{"merchant": "m1", "cents": 2}'), 100)
        event = await topic.decode(as_message(condensed), propagate=True)
        return [(r.offset, r.value) for r in event.value]

    assert asyncio.run(scenario()) == [(40, None), (41, Payment("m1", 2))]


def test_a_batches_topic_reached_by_a_single_record_names_the_eos_transport():
    async def scenario() -> None:
        topic = worker_app().topic("payments", schema=Batches(value_type=bytes, value_serializer="raw"))
        with pytest.raises(SettingRefused, match="eos://"):
            await topic.decode(as_message(fetched(b"x")[0]), propagate=True)

    asyncio.run(scenario())


@pytest.mark.parametrize("max_records", [0, -1, 2.5, "100"])
def test_a_bad_batch_size_is_refused_with_its_value(max_records):
    with pytest.raises(SettingRefused, match="max_records"):
        Batches(value_type=bytes, max_records=max_records)


def test_a_topic_subscribed_with_and_without_batches_is_refused():
    app = worker_app()
    channels = [app.topic("payments", schema=Batches(value_type=bytes)), app.topic("payments", value_type=bytes)]
    with pytest.raises(SettingRefused, match="'payments'"):
        batched_topics(channels)


class OwnTopic(faust.Topic):
    """A topic class of the app's own: the library leaves it to Faust."""


def test_the_consumer_hands_out_a_batches_topic_in_batches_and_other_topics_record_by_record():
    async def scenario() -> None:
        app = worker_app()
        app.topics.add(app.topic("payments", schema=Batches(value_type=bytes, max_records=3)))
        app.topics.add(OwnTopic(app, topics=["refunds"], value_type=bytes))
        consumer: Consumer = app.consumer
        refunds = TP("refunds", 0)
        condensed = consumer._condensed({PAYMENTS: fetched(*[b"p"] * 4), refunds: [record(7, refunds)]})
        assert [(r.value.first_offset, r.offset) for r in condensed[PAYMENTS]] == [(40, 42), (43, 43)]
        assert [r.offset for r in condensed[refunds]] == [7]

    asyncio.run(scenario())
