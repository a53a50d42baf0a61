"""At-least-once: an event's records wait for its offset's commit, then are written before it, outputs first."""
from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from faust.types import TP

from faust_eos.committing.at_least_once import UNWRITABLE, AtLeastOnce, PlainProducer
from faust_eos.errors import OutputNotWritten
from faust_eos.state.staging import SourceTP, staged_record
from tests.unit.fakes import FakeProducer, FakeTables, error

CHANGELOG = "app-counts-changelog"
OUTPUT = "app-updates"
PAYMENTS = TP("payments", 0)
SOURCE = SourceTP(PAYMENTS.topic, PAYMENTS.partition)


class FakeDelivery:
    """Acknowledges each record with its position in the order delivered, or fails as told."""

    def __init__(self, failure: Exception | None = None, fail_on_call: int | None = None) -> None:
        self.delivered: list[bytes] = []
        self.calls: list[list[bytes]] = []  # the records of each call, acknowledged before the next one began
        self.failure = failure
        self.fail_on_call = fail_on_call  # the call that fails (0 first); None: every call

    async def deliver(self, records) -> list[Any]:
        self.calls.append([record.value for record in records])
        if self.failure is not None and self.fail_on_call in (None, len(self.calls) - 1):
            raise self.failure
        start = len(self.delivered)
        self.delivered += [record.value for record in records]
        return [SimpleNamespace(offset=start + i) for i in range(len(records))]


class FakeConsumer:
    """The consumer as the guarantee calls it: commits to the group as told, and notes what it is asked."""

    def __init__(self, group_accepts: bool = True) -> None:
        self.group_accepts = group_accepts
        self.early_commits = 0
        self.committed_to_group: list[dict] = []
        self.partitions_committed = 0

    def commit_early(self) -> None:
        self.early_commits += 1

    def count_committed(self, partitions: int) -> None:
        self.partitions_committed += partitions

    async def commit_offsets_to_group(self, offsets) -> bool:
        self.committed_to_group.append(dict(offsets))
        return self.group_accepts


def at_least_once(tables: FakeTables, delivery: FakeDelivery, consumer: FakeConsumer | None = None,
                  max_held: int = 100) -> AtLeastOnce:
    return AtLeastOnce(tables, delivery, consumer or FakeConsumer(), max_held, offsets=lambda: None)


def held(delivery: FakeDelivery, consumer: FakeConsumer | None = None) -> tuple[AtLeastOnce, FakeTables, list]:
    """Held records of four events: table writes of keys k and j, and one output per event."""
    tables = FakeTables(CHANGELOG)
    sends = at_least_once(tables, delivery, consumer)
    resolved: list[tuple[bytes, int]] = []
    for offset, key, value in [(1, b"k", b"k=1"), (2, b"j", b"j=1"), (3, b"k", b"k=2"), (7, b"k", b"k=3")]:
        tables.write(SOURCE, offset, key, value)
        sends.staging.add_at(SOURCE,
                             staged_record(OUTPUT, key, b"out-" + value, 0, None, None, offset,
                                        lambda md, v=value: resolved.append((v, md.offset))))
    return sends, tables, resolved


def stored(tables: FakeTables) -> list[tuple[bytes, int]]:
    return [(value, md.offset) for value, md in tables.stored]


def test_a_commit_writes_the_outputs_and_newest_table_write_per_key_of_its_events_then_stores_them():
    delivery = FakeDelivery()
    sends, tables, resolved = held(delivery)
    asyncio.run(sends.write_up_to({PAYMENTS: 4}))
    assert delivery.delivered == [b"out-k=1", b"out-j=1", b"out-k=2", b"k=2", b"j=1"]
    assert stored(tables) == [(b"k=2", 3), (b"j=1", 4)]
    assert resolved == [(b"k=1", 0), (b"j=1", 1), (b"k=2", 2)]
    assert [r.value for r in sends.staging.take(SOURCE, 100)] == [b"out-k=3"]
    assert [r.value for r in tables.changelog_records({SOURCE: 100})] == [b"k=3"]


def test_table_writes_are_produced_only_once_every_output_of_the_commit_is_acknowledged():
    # A table write can mark an event as handled (a dedup mark): written before the event's
    # output, a crash between would have the replay skip an event whose output never landed.
    delivery = FakeDelivery()
    sends, _, _ = held(delivery)
    asyncio.run(sends.write_up_to({PAYMENTS: 4}))
    assert delivery.calls == [[b"out-k=1", b"out-j=1", b"out-k=2"], [b"k=2", b"j=1"]]


def test_a_commit_of_table_writes_alone_or_outputs_alone_makes_one_call():
    delivery = FakeDelivery()
    tables = FakeTables(CHANGELOG)
    sends = at_least_once(tables, delivery)
    tables.write(SOURCE, 1, b"k", b"k=1")
    asyncio.run(sends.write_up_to({PAYMENTS: 2}))
    sends.staging.add_at(SOURCE, staged_record(OUTPUT, b"k", b"o", 0, None, None, 2))
    asyncio.run(sends.write_up_to({PAYMENTS: 3}))
    assert delivery.calls == [[b"k=1"], [b"o"]]


@pytest.mark.parametrize("failing_call, stored_as", [
    (0, [(b"k=2", 3), (b"j=1", 4)]),
    (1, [(b"k=2", 6), (b"j=1", 7)]),  # the outputs were written: written again (at-least-once's duplicates)
], ids=["the outputs fail", "the table writes fail after the outputs"])
def test_records_that_cannot_be_written_stay_held_for_the_next_commit(failing_call, stored_as):
    delivery = FakeDelivery(failure=KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT)), fail_on_call=failing_call)
    sends, tables, resolved = held(delivery)
    with pytest.raises(KafkaException):
        asyncio.run(sends.write_up_to({PAYMENTS: 4}))
    assert tables.stored == [] and resolved == [] and sends.uncommitted() == 8
    assert tables.not_committed_records == [b"k=2", b"j=1"]
    delivery.failure = None
    asyncio.run(sends.write_up_to({PAYMENTS: 4}))
    assert delivery.calls[-2:] == [[b"out-k=1", b"out-j=1", b"out-k=2"], [b"k=2", b"j=1"]]
    assert stored(tables) == stored_as and len(resolved) == 3


def test_a_record_no_retry_can_write_stops_the_worker_with_nothing_committed():
    delivery = FakeDelivery(failure=KafkaException(error(KafkaError.MSG_SIZE_TOO_LARGE)))
    sends, tables, resolved = held(delivery)
    with pytest.raises(OutputNotWritten, match="Message size too large"):
        asyncio.run(sends.write_up_to({PAYMENTS: 4}))
    assert tables.stored == [] and resolved == [] and sends.uncommitted() == 8
    delivery.failure = None
    with pytest.raises(OutputNotWritten):  # nor may a later commit go through
        asyncio.run(sends.write_up_to({PAYMENTS: 4}))


def test_after_a_record_sent_straight_failed_no_commit_goes_through():
    delivery = FakeDelivery()
    sends, tables, _ = held(delivery)
    sends.output_failed(OSError("record too large"))
    with pytest.raises(OutputNotWritten, match="record too large"):
        asyncio.run(sends.write_up_to({PAYMENTS: 4}))
    assert delivery.delivered == [] and tables.stored == []


def test_revoked_partitions_release_their_held_records():
    sends, tables, _ = held(FakeDelivery())
    sends.drop({PAYMENTS})
    assert sorted(tables.released) == [b"j=1", b"k=1", b"k=2", b"k=3"]
    assert sends.uncommitted() == 0


def test_holding_as_many_records_as_allowed_asks_for_an_early_commit():
    consumer = FakeConsumer()
    sends = at_least_once(FakeTables(CHANGELOG), FakeDelivery(), consumer, max_held=3)
    for value in (b"1", b"2"):
        sends.stage(CHANGELOG, b"k", value, 0, None, None, None)  # outside an event: a table write
    assert consumer.early_commits == 0
    sends.stage(CHANGELOG, b"k", b"3", 0, None, None, None)
    assert consumer.early_commits == 1


def test_a_commit_writes_the_records_then_commits_the_offsets_to_the_group_and_counts_them():
    consumer = FakeConsumer()
    delivery = FakeDelivery()
    sends, _, _ = held(delivery, consumer)
    assert asyncio.run(sends.commit({PAYMENTS: 4})) is True
    assert len(delivery.calls) == 2 and consumer.committed_to_group == [{PAYMENTS: 4}]
    assert consumer.partitions_committed == 1


def test_a_commit_whose_records_were_not_written_commits_no_offset():
    consumer = FakeConsumer()
    sends, _, _ = held(FakeDelivery(failure=KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))), consumer)
    assert asyncio.run(sends.commit({PAYMENTS: 4})) is False
    assert consumer.committed_to_group == [] and consumer.partitions_committed == 0


def test_offsets_the_group_refused_are_not_counted():
    consumer = FakeConsumer(group_accepts=False)
    sends, _, _ = held(FakeDelivery(), consumer)
    assert asyncio.run(sends.commit({PAYMENTS: 4})) is False
    assert consumer.committed_to_group == [{PAYMENTS: 4}] and consumer.partitions_committed == 0


def test_a_table_write_outside_an_event_commits_with_the_next_commit_whatever_its_offsets():
    delivery = FakeDelivery()
    tables = FakeTables(CHANGELOG)
    sends = at_least_once(tables, delivery)
    sends.stage(CHANGELOG, b"expired", None, 0, None, None, None)  # a window's expiry: a tombstone
    asyncio.run(sends.write_up_to({}))
    assert delivery.calls == [[None]] and tables.held() == 0


def test_the_producer_waits_for_every_record_and_gives_their_metadata():
    made: list[FakeProducer] = []
    producer = PlainProducer({}, producer_factory=lambda config: made.append(FakeProducer(config)) or made[-1])
    records = [staged_record(OUTPUT, b"k", b"v1", None, None, None, 1), staged_record(OUTPUT, b"k", b"v2", 2, None,
                                                                                      None, 2)]
    metadata = asyncio.run(producer.deliver(records))
    assert [md.offset for md in metadata] == [0, 1]
    assert made[0].calls == [f"list_topics {OUTPUT}", "produce", "produce", "poll"]  # reports served on the loop
    # librdkafka gives a record up no later than a commit does: no stale copy waits in its queue
    assert made[0].config["message.timeout.ms"] == 30_000
    producer.close()


def test_a_topic_name_librdkafka_refuses_fails_the_delivery_as_a_record_no_retry_can_write():
    made: list[FakeProducer] = []
    producer = PlainProducer({}, producer_factory=lambda config: made.append(FakeProducer(config)) or made[-1])
    made[0].topic_refusals[OUTPUT] = RuntimeError("Unable to create topic object")
    with pytest.raises(KafkaException) as raised:
        asyncio.run(producer.deliver([staged_record(OUTPUT, b"k", b"v", None, None, None, 1)]))
    assert raised.value.args[0].code() in UNWRITABLE  # AtLeastOnce stops the worker with OutputNotWritten
    assert "produce" not in made[0].calls
    producer.close()


def test_a_closed_producer_refuses_to_deliver_instead_of_waiting_for_ever():
    producer = PlainProducer({}, producer_factory=FakeProducer)
    producer.close()
    with pytest.raises(KafkaException, match="closed"):
        asyncio.run(producer.deliver([staged_record(OUTPUT, b"k", b"v", None, None, None, 1)]))


def test_a_producer_that_failed_for_good_is_replaced_and_the_commit_fails():
    made: list[FakeProducer] = []
    producer = PlainProducer({}, producer_factory=lambda config: made.append(FakeProducer(config)) or made[-1])
    made[0].failures["produce"] = [error(KafkaError._FATAL, fatal=True)]
    with pytest.raises(KafkaException):
        asyncio.run(producer.deliver([staged_record(OUTPUT, b"k", b"v", None, None, None, 1)]))
    assert len(made) == 2
    asyncio.run(producer.deliver([staged_record(OUTPUT, b"k", b"v", None, None, None, 1)]))
    assert made[1].calls == [f"list_topics {OUTPUT}", "produce", "poll"]  # the new producer learns the topic too
    producer.close()


def test_delivery_reports_are_served_on_the_event_loop_until_the_last_record_is_acknowledged():
    made: list[FakeProducer] = []
    producer = PlainProducer({}, producer_factory=lambda config: made.append(FakeProducer(config)) or made[-1])
    made[0].in_flight = {1}
    serving_threads: set[int] = set()
    poll = made[0].poll
    made[0].poll = lambda timeout: serving_threads.add(threading.get_ident()) or poll(timeout)

    async def deliver_while_the_broker_acknowledges() -> list[Any]:
        delivery = asyncio.create_task(producer.deliver(
            [staged_record(OUTPUT, b"k", b"v1", None, None, None, 1), staged_record(OUTPUT, b"k", b"v2", None, None,
                                                                                    None, 2)]))
        while made[0].calls.count("poll") < 3:  # still waiting for the second record
            await asyncio.sleep(0.001)
        assert not delivery.done()
        made[0].in_flight = set()
        return await delivery

    metadata = asyncio.run(deliver_while_the_broker_acknowledges())
    assert [md.offset for md in metadata] == [0, 1]
    assert serving_threads == {threading.main_thread().ident}  # the loop's thread polled, not the producer's
    producer.close()


def test_a_record_never_acknowledged_fails_the_delivery_after_the_call_timeout():
    made: list[FakeProducer] = []
    producer = PlainProducer({}, timeout_s=0.05,
                             producer_factory=lambda config: made.append(FakeProducer(config)) or made[-1])
    made[0].in_flight = {0}
    with pytest.raises(KafkaException) as raised:
        asyncio.run(producer.deliver([staged_record(OUTPUT, b"k", b"v", None, None, None, 1)]))
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT
    producer.close()


def test_a_record_failed_for_good_replaces_the_producer_before_the_next_delivery():
    made: list[FakeProducer] = []
    producer = PlainProducer({}, producer_factory=lambda config: made.append(FakeProducer(config)) or made[-1])
    made[0].delivery_errors[0] = error(KafkaError._FATAL, fatal=True)
    with pytest.raises(KafkaException):
        asyncio.run(producer.deliver([staged_record(OUTPUT, b"k", b"v", None, None, None, 1)]))
    asyncio.run(producer.deliver([staged_record(OUTPUT, b"k", b"v", None, None, None, 1)]))
    assert len(made) == 2 and made[1].calls == [f"list_topics {OUTPUT}", "produce", "poll"]
    producer.close()
