"""Where a restore of a transactional changelog ends, on the real broker.

A changelog written in transactions ends with commit markers, and may end with
records of aborted or still open transactions: none of them is a record a
``read_committed`` restore receives. Recovery is complete once the last
committed record is applied, so ``restore_ends`` must point just past it.
"""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic
from faust.types import TP

from app.kafka import admin, producer_config
from faust_eos.committing.offsets import FIRST_SEARCH_SPAN, CommittedOffsets
from faust_eos.state.table_state import ChangelogBounds
from tools.workers import wait_for

pytestmark = pytest.mark.broker


@pytest.fixture
def changelog(kafka):
    """A fresh two-partition topic, and a reader of where its partitions end."""
    topic = f"restore-ends-{uuid.uuid4().hex[:8]}"
    client = admin(kafka)
    for future in client.create_topics([NewTopic(topic, 2, 1)], operation_timeout=30).values():
        future.result()
    offsets = CommittedOffsets(kafka.kafka_client(), f"restore-ends-{uuid.uuid4().hex[:8]}")
    yield topic, offsets
    offsets.close()


def transactional_producer(kafka, name: str) -> Producer:
    producer = Producer(producer_config(kafka, **{"transactional.id": f"{name}-{uuid.uuid4().hex[:8]}"}))
    producer.init_transactions(30)
    return producer


def write(producer: Producer, topic: str, partition: int, count: int, *, commit: bool) -> None:
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v", partition=partition)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_a_restore_ends_past_the_last_committed_record_not_at_the_commit_markers(kafka, changelog):
    topic, offsets = changelog
    producer = transactional_producer(kafka, "ends")
    write(producer, topic, 0, 3, commit=True)  # offsets 0-2, marker at 3
    write(producer, topic, 0, 2, commit=True)  # offsets 4-5, marker at 6

    assert offsets.restore_ends([TP(topic, 0)]) == {TP(topic, 0): 6}


def test_aborted_and_open_transactions_after_the_last_commit_do_not_move_the_end(kafka, changelog):
    topic, offsets = changelog
    producer = transactional_producer(kafka, "ends")
    write(producer, topic, 0, 4, commit=True)  # offsets 0-3, marker at 4
    write(producer, topic, 0, FIRST_SEARCH_SPAN * 3, commit=False)  # aborted: wider than the first search
    stalled = transactional_producer(kafka, "stalled")
    stalled.begin_transaction()
    stalled.produce(topic, value=b"open", partition=0)
    stalled.flush(30)

    try:
        assert offsets.restore_ends([TP(topic, 0)]) == {TP(topic, 0): 4}
    finally:
        stalled.abort_transaction(30)


def test_a_partition_without_committed_records_ends_where_it_starts(kafka, changelog):
    topic, offsets = changelog
    producer = transactional_producer(kafka, "ends")
    write(producer, topic, 1, 5, commit=False)

    ends = offsets.restore_ends([TP(topic, 0), TP(topic, 1)])

    assert ends == {TP(topic, 0): 0, TP(topic, 1): 0}


def test_records_past_the_last_stable_offset_show_as_a_pending_transaction_until_it_settles(kafka, changelog):
    topic, offsets = changelog
    producer = transactional_producer(kafka, "pending")
    write(producer, topic, 0, 2, commit=True)  # offsets 0-1, marker at 2
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)  # offset 3
    producer.flush(30)

    assert offsets.restore_bounds([TP(topic, 0)]) == {TP(topic, 0): ChangelogBounds(0, 2, pending=True)}
    producer.commit_transaction(30)
    wait_for(lambda: not offsets.restore_bounds([TP(topic, 0)])[TP(topic, 0)].pending, timeout=30,
             what="the commit markers")
    assert offsets.restore_bounds([TP(topic, 0)]) == {TP(topic, 0): ChangelogBounds(0, 4, pending=False)}


def test_a_transaction_left_open_hides_what_commits_after_it_until_it_ends_and_a_restore_waits_for_it(kafka, changelog):
    topic, offsets = changelog
    lost = transactional_producer(kafka, "lost")  # an owner lost inside its transaction
    lost.begin_transaction()
    lost.produce(topic, value=b"open", partition=0)  # offset 0
    lost.flush(30)
    next_owner = transactional_producer(kafka, "next-owner")
    write(next_owner, topic, 0, 3, commit=True)  # offsets 1-3, marker at 4

    assert offsets.restore_ends([TP(topic, 0)]) == {TP(topic, 0): 0}  # the committed records are out of sight
    with pytest.raises(KafkaException, match=rf"transactions on {topic}\[0\] still open after 1 s") as raised:
        offsets.wait_for_open_transactions([TP(topic, 0)], within_s=1)
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT

    lost.abort_transaction(30)  # as the broker does once the transaction times out
    offsets.wait_for_open_transactions([TP(topic, 0), TP(topic, 1)], within_s=60)

    assert offsets.restore_ends([TP(topic, 0)]) == {TP(topic, 0): 4}
