"""Transaction operations without a broker: response parsing, request layout, hanging rules, rows."""
import pytest

from kafka_ops.offsets import PartitionOffsets
from kafka_ops.transaction_requests import (
    PartitionProducer,
    Transaction,
    TransactionToolError,
    parse_describe_producers,
    parse_describe_transactions,
    parse_list_transactions,
    parse_write_txn_markers,
    write_markers_body,
)
from kafka_ops.transactions import hanging_reasons, lso_rows, transaction_rows
from kafka_ops.wire import NO_TAGS, Reader, compact_array, compact_string, int16, int32, int64

NOW_MS = 1_000_000


def ongoing(start_ms=NOW_MS - 5_000, timeout_ms=60_000, partitions=(("t", 0),)):
    return Transaction("tid", "Ongoing", 7, 1, timeout_ms, start_ms, partitions)


def open_on(topic="t", partition=0, producer_id=7):
    return PartitionProducer(topic, partition, producer_id, 1, 3, 40, NOW_MS - 1_000)


def test_list_transactions_response_is_parsed():
    entry = compact_string("a") + int64(5) + compact_string("Ongoing") + NO_TAGS
    body = int32(0) + int16(0) + compact_array(["Bogus"], compact_string) + compact_array([entry], bytes) + NO_TAGS
    assert parse_list_transactions(Reader(body)) == [("a", 5, "Ongoing")]


def test_list_transactions_answer_of_a_loading_coordinator_is_retriable_and_others_fail():
    loading = int32(0) + int16(14) + compact_array([], compact_string) + compact_array([], bytes) + NO_TAGS
    assert parse_list_transactions(Reader(loading), retriable={14}) is None
    with pytest.raises(TransactionToolError, match="COORDINATOR_LOAD_IN_PROGRESS"):
        parse_list_transactions(Reader(loading))


def test_describe_transactions_response_is_parsed_with_sorted_partitions():
    topic = compact_string("t") + compact_array([2, 0], int32) + NO_TAGS
    state = (int16(0) + compact_string("tid") + compact_string("Ongoing") + int32(60_000) + int64(123) + int64(7)
             + int16(1) + compact_array([topic], bytes) + NO_TAGS)
    [(error, transaction)] = parse_describe_transactions(Reader(int32(0) + compact_array([state], bytes) + NO_TAGS))
    assert error == 0
    assert transaction == Transaction("tid", "Ongoing", 7, 1, 60_000, 123, (("t", 0), ("t", 2)))


def test_describe_producers_response_is_parsed_with_partition_errors():
    producer = int64(7) + int32(1) + int32(9) + int64(555) + int32(3) + int64(40) + NO_TAGS
    good = int32(0) + int16(0) + compact_string(None) + compact_array([producer], bytes) + NO_TAGS
    bad = int32(1) + int16(6) + compact_string("not the leader") + compact_array([], bytes) + NO_TAGS
    topic = compact_string("t") + compact_array([good, bad], bytes) + NO_TAGS
    producers, errors = parse_describe_producers(Reader(int32(0) + compact_array([topic], bytes) + NO_TAGS))
    assert producers == [PartitionProducer("t", 0, 7, 1, 3, 40, 555)]
    assert errors == {("t", 1): "not the leader"}


@pytest.mark.parametrize("committed", [False, True])
def test_marker_request_carries_the_partition_producer_result_and_coordinator_epoch(committed):
    reader = Reader(write_markers_body(open_on(), committed))
    assert reader.uvarint() == 2  # one marker
    assert (reader.int64(), reader.int16(), reader.boolean()) == (7, 1, committed)  # producer, epoch, result
    assert reader.uvarint() == 2 and reader.compact_string() == "t"
    assert reader.compact_array(reader.int32) == [0]
    reader.tags()
    assert reader.int32() == 3
    reader.tags()
    reader.tags()
    assert reader.done()


def test_a_marker_can_carry_another_epoch_than_the_partition_knows():
    reader = Reader(write_markers_body(open_on(), True, producer_epoch=2))
    reader.uvarint()
    assert (reader.int64(), reader.int16()) == (7, 2)


def test_unknown_coordinator_epoch_is_sent_as_zero():
    body = write_markers_body(PartitionProducer("t", 0, 7, 1, -1, 40, 0), committed=False)
    assert body[-6:-2] == int32(0)


def test_write_txn_markers_response_is_parsed():
    partition = int32(0) + int16(0) + NO_TAGS
    refused = int32(1) + int16(47) + NO_TAGS
    topic = compact_string("t") + compact_array([partition, refused], bytes) + NO_TAGS
    marker = int64(7) + compact_array([topic], bytes) + NO_TAGS
    assert parse_write_txn_markers(Reader(compact_array([marker], bytes) + NO_TAGS)) == {("t", 0): 0, ("t", 1): 47}


def test_young_transaction_known_to_its_coordinator_is_not_hanging():
    assert hanging_reasons(open_on(), ongoing(), NOW_MS, None) == ()


def test_transaction_past_its_own_timeout_is_hanging():
    [reason] = hanging_reasons(open_on(), ongoing(start_ms=NOW_MS - 61_000), NOW_MS, None)
    assert "longer than its transaction timeout (60 s)" in reason


def test_threshold_overrides_the_transaction_timeout():
    assert hanging_reasons(open_on(), ongoing(), NOW_MS, 10.0) == ()
    [reason] = hanging_reasons(open_on(), ongoing(), NOW_MS, 2.0)
    assert "--older-than threshold (2 s)" in reason


@pytest.mark.parametrize("transaction", [None, Transaction("tid", "CompleteAbort", 7, 2, 60_000, -1, ())])
def test_open_on_a_partition_but_not_at_its_coordinator_is_hanging(transaction):
    [reason] = hanging_reasons(open_on(), transaction, NOW_MS, None)
    assert "no open transaction for producer 7" in reason


def test_coordinator_transaction_without_this_partition_is_hanging():
    [reason] = hanging_reasons(open_on(partition=1), ongoing(), NOW_MS, None)
    assert "does not include this partition" in reason


def test_lso_rows_name_the_producer_holding_the_lso():
    offsets = [PartitionOffsets("t", 0, 50, 40), PartitionOffsets("t", 1, 9, 9)]
    producers = [open_on(), PartitionProducer("t", 1, 8, 0, 0, -1, 0)]
    assert lso_rows(offsets, producers) == [("t-0", "50", "40", "10", "producer 7"), ("t-1", "9", "9", "0", "-")]


def test_transaction_rows_show_age_and_partitions():
    closed = Transaction("idle", "CompleteCommit", 9, 4, 30_000, NOW_MS - 2_000, ())  # start of the last one
    assert transaction_rows([ongoing(), closed], NOW_MS) == [
        ("tid", "7", "1", "Ongoing", "5.0 s", "60 s", "t-0"),
        ("idle", "9", "4", "CompleteCommit", "-", "30 s", "-"),
    ]
