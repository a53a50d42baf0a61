"""Lost markers on the real broker: the coordinator's log holds its decisions, a marker written on a
partition ends the transaction there as decided, and a transaction its coordinator still has open is
never taken for one whose markers were lost.

The broker's own loss (Kafka 4.4.0, around a restart: docs/limitations.md) cannot be made to
happen on demand; the fault matrix meets it, and its harness writes the markers (tools.markers).
"""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from kafka_ops import transactions as txn
from kafka_ops.lost_markers import LoggedState, LostMarker, read_transaction_log, write_lost_markers
from tests.integration.transactions_support import STALLED_RECORDS, create_topic, faust, read_committed

pytestmark = pytest.mark.broker


def test_the_coordinators_log_holds_the_decision_and_the_partitions_of_a_committed_transaction(kafka):
    topic = f"t-log-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, 2)
    transactional_id = f"logged-{uuid.uuid4().hex[:8]}"
    producer = Producer({**kafka.kafka_client(), "transactional.id": transactional_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce(topic, value=b"v", partition=partition)
    producer.commit_transaction(60)

    states = [s for s in read_transaction_log(kafka.kafka_client()) if s.transactional_id == transactional_id]

    assert [s.state for s in states][-2:] == ["PrepareCommit", "CompleteCommit"]
    assert states[-2].partitions == {(topic, 0), (topic, 1)}
    assert len({s.producer_id for s in states}) == 1


def test_a_commit_marker_written_on_a_partition_ends_its_open_transaction_there_as_committed(kafka, stalled):
    cluster, admin = txn.connect(kafka.kafka_client())
    with cluster:
        leaders = txn.topic_leaders(admin, [stalled.topic])
        [open_here] = [p for p in txn.describe_producers(cluster, leaders) if p.in_transaction]
        decision = LoggedState(stalled.transactional_id, open_here.producer_id, open_here.producer_epoch,
                               "PrepareCommit", frozenset({(stalled.topic, 0)}), 0, 0)
        assert read_committed(kafka, stalled.topic, 0) == []

        write_lost_markers(cluster, admin, [LostMarker(open_here, decision)])

        [offsets] = txn.partition_offsets(admin, [(stalled.topic, 0)]).values()
    assert offsets.lso_lag == 0
    assert read_committed(kafka, stalled.topic, 0) == [b"uncommitted-%d" % i for i in range(STALLED_RECORDS)]


def test_a_transaction_its_coordinator_still_has_open_is_no_lost_marker(kafka, stalled):
    result = faust("lost-markers", "--topic", stalled.topic, "--write", "--yes")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no lost markers"  # nor listed as ended without a decision
    assert read_committed(kafka, stalled.topic, 0) == []  # still open: nothing was written
