"""Lost markers without a broker: the transaction log's records, and whose decision a partition waits for."""
import pytest

from kafka_ops import lost_markers
from kafka_ops.lost_markers import (
    LoggedState,
    LostMarker,
    LostMarkers,
    decision_for,
    decode_log_record,
    ended_by_coordinator,
    tearing_abort,
)
from kafka_ops.transaction_requests import PartitionProducer, Transaction, TransactionToolError
from kafka_ops.transactions import HangingTransaction
from kafka_ops.wire import NO_TAGS, compact_array, compact_string, int8, int16, int32, int64, uvarint

OPEN_ON_T0 = PartitionProducer("t", 0, producer_id=7, producer_epoch=2, coordinator_epoch=1, txn_start_offset=40,
                               last_timestamp_ms=1_500)


def string(value: str) -> bytes:
    return int16(len(value)) + value.encode()


def key(transactional_id: str = "tid") -> bytes:
    return int16(0) + string(transactional_id)


def value_v0(status: int, partitions: dict[str, list[int]], producer_id=7, epoch=2) -> bytes:
    topics = b"".join(string(t) + int32(len(ps)) + b"".join(int32(p) for p in ps) for t, ps in partitions.items())
    return (int16(0) + int64(producer_id) + int16(epoch) + int32(60_000) + int8(status)
            + int32(len(partitions)) + topics + int64(2_000) + int64(1_000))


def value_v1(status: int, partitions: dict[str, list[int]]) -> bytes:
    topics = [compact_string(t) + compact_array(ps, int32) + NO_TAGS for t, ps in partitions.items()]
    tagged = uvarint(2) + uvarint(0) + uvarint(8) + int64(6) + uvarint(2) + uvarint(2) + int16(2)
    return (int16(1) + int64(7) + int16(2) + int32(60_000) + int8(status) + compact_array(topics, bytes)
            + int64(2_000) + int64(1_000) + tagged)


def logged(state: str, partitions=(("t", 0),), producer_id=7, epoch=2, transactional_id="tid") -> LoggedState:
    return LoggedState(transactional_id, producer_id, epoch, state, frozenset(partitions), 1_000, 2_000)


def hanging(transaction=None, producer=OPEN_ON_T0) -> HangingTransaction:
    return HangingTransaction(producer, transaction, ("why",), True, 3)


@pytest.mark.parametrize("encode", [value_v0, value_v1], ids=["v0", "v1 (flexible, tagged fields)"])
def test_a_transaction_log_record_decodes_to_its_state_and_partitions(encode):
    state = decode_log_record(key("tid"), encode(2, {"t": [0, 3], "u": [1]}))
    assert state == LoggedState("tid", 7, 2, "PrepareCommit", frozenset({("t", 0), ("t", 3), ("u", 1)}), 1_000, 2_000)


def test_a_tombstone_is_no_state_and_an_unknown_version_is_refused():
    assert decode_log_record(key(), None) is None
    with pytest.raises(TransactionToolError, match="value version 9"):
        decode_log_record(key(), int16(9) + bytes(40))


def test_the_decision_is_the_producers_last_prepare_naming_the_partition():
    log = [logged("Ongoing"), logged("PrepareAbort"), logged("CompleteAbort", partitions=()),
           logged("Ongoing"), logged("PrepareCommit"), logged("CompleteCommit", partitions=()),
           logged("PrepareAbort", partitions=(("t", 1),))]  # a later transaction that did not write here
    assert decision_for(OPEN_ON_T0, log) is log[4]


@pytest.mark.parametrize("other", [
    logged("PrepareCommit", producer_id=8),
    logged("PrepareCommit", epoch=1),
    logged("PrepareCommit", partitions=(("t", 1),)),
    logged("Ongoing"),
], ids=["another producer", "an older epoch", "another partition", "not decided"])
def test_no_decision_when_the_log_has_none_for_this_producer_and_partition(other):
    assert decision_for(OPEN_ON_T0, [other]) is None


def test_a_decision_that_bumped_the_epoch_counts_as_the_producers():
    bumped = logged("PrepareCommit", epoch=3)  # transaction.version 2 bumps the epoch at the decision
    assert decision_for(OPEN_ON_T0, [bumped]) is bumped


def test_only_transactions_their_coordinator_has_ended_count():
    assert ended_by_coordinator(hanging(None))
    assert ended_by_coordinator(hanging(Transaction("tid", "Ongoing", 7, 2, 60_000, 1_000, (("t", 1),))))
    assert not ended_by_coordinator(hanging(Transaction("tid", "Ongoing", 7, 2, 60_000, 1_000, (("t", 0),))))
    assert not ended_by_coordinator(hanging(Transaction("tid", "PrepareCommit", 7, 2, 60_000, 1_000, (("t", 0),))))


def test_ended_transactions_are_split_by_whether_the_log_decides_them(monkeypatch):
    decided, undecided, still_open = (hanging(None), hanging(None, producer=PartitionProducer("t", 1, 9, 0, 0, 5, 0)),
                                      hanging(Transaction("tid", "Ongoing", 7, 2, 60_000, 1_000, (("t", 0),))))
    monkeypatch.setattr(lost_markers, "find_hanging", lambda *args: [decided, undecided, still_open])
    monkeypatch.setattr(lost_markers, "read_transaction_log", lambda client: [logged("PrepareCommit")])

    found = lost_markers.find_lost_markers(None, None, {}, ["t"])

    assert found.lost == [LostMarker(OPEN_ON_T0, logged("PrepareCommit"))] and found.lost[0].committed
    assert found.undecided == [undecided] and found.torn == []


def test_the_log_is_not_read_when_no_transaction_was_ended(monkeypatch):
    monkeypatch.setattr(lost_markers, "find_hanging", lambda *args: [])
    monkeypatch.setattr(lost_markers, "read_transaction_log", lambda client: pytest.fail("read the log"))
    assert lost_markers.find_lost_markers(None, None, {}, ["t"]) == LostMarkers([], [], [])


def test_a_lost_marker_says_which_marker_for_whom():
    marker = LostMarker(OPEN_ON_T0, logged("PrepareAbort", transactional_id="worker-1"))
    assert marker.describe() == "t-0: abort marker of 'worker-1' (producer 7, transaction from offset 40)"


# -- a committed transaction the broker tore ------------------------------------------------------
def transaction(state: str, start_ms: int, partitions, epoch: int = 0) -> LoggedState:
    """A record of producer 7's transaction that began at ``start_ms`` (transaction.version 1: epoch 0)."""
    return LoggedState("tid", 7, epoch, state, frozenset(partitions), start_ms, start_ms + 100)


T1_PARTITIONS = (("out", 0), ("out", 1), ("__consumer_offsets", 0))
T1 = transaction("PrepareCommit", 1_000, T1_PARTITIONS)


def open_on(topic: str, partition: int) -> PartitionProducer:
    return PartitionProducer(topic, partition, producer_id=7, producer_epoch=0, coordinator_epoch=1,
                             txn_start_offset=10, last_timestamp_ms=1_050)


def test_a_commit_whose_producers_next_transaction_was_aborted_on_a_shared_partition_was_torn():
    # the next transaction wrote into out-1 while T1's markers were missing there: its abort took T1's records too
    aborted_next = transaction("PrepareAbort", 2_000, [("out", 1), ("out", 2)], epoch=1)
    log = [transaction("Ongoing", 1_000, T1_PARTITIONS), T1, transaction("CompleteCommit", 1_000, ()),
           transaction("Ongoing", 2_000, [("out", 1), ("out", 2)]), aborted_next]
    assert tearing_abort(T1, log) is aborted_next


@pytest.mark.parametrize("following", [
    [transaction("PrepareCommit", 2_000, [("out", 1)])],
    [transaction("PrepareAbort", 2_000, [("out", 2)], epoch=1)],
    [],
], ids=["the next one committed", "the next one shared no partition", "no next one"])
def test_a_commit_is_not_torn_otherwise(following):
    assert tearing_abort(T1, [T1, *following]) is None


def test_a_torn_commit_whose_closed_partitions_the_abort_reached_is_aborted_whole(monkeypatch):
    aborted_next = transaction("PrepareAbort", 2_000, [("out", 1)], epoch=1)
    still_open = [hanging(None, producer=open_on("out", 0)), hanging(None, producer=open_on("__consumer_offsets", 0))]
    monkeypatch.setattr(lost_markers, "find_hanging", lambda *args: still_open)
    monkeypatch.setattr(lost_markers, "read_transaction_log", lambda client: [T1, aborted_next])

    found = lost_markers.find_lost_markers(None, None, {}, ["out"])

    assert [m.committed for m in found.lost] == [False, False] and found.torn == []
    assert found.lost[1].describe() == (
        "__consumer_offsets-0: abort marker of 'tid' (producer 7, transaction from offset 10): committed by its "
        "coordinator, but the broker aborted it on out-1 with the next transaction")


def test_a_torn_commit_with_a_partition_closed_by_its_commit_gets_no_marker(monkeypatch):
    # out-1 was aborted by the next transaction, out-0 is closed and the abort never reached it: it has T1's commit
    aborted_next = transaction("PrepareAbort", 2_000, [("out", 1)], epoch=1)
    monkeypatch.setattr(lost_markers, "find_hanging",
                        lambda *args: [hanging(None, producer=open_on("__consumer_offsets", 0))])
    monkeypatch.setattr(lost_markers, "read_transaction_log", lambda client: [T1, aborted_next])

    found = lost_markers.find_lost_markers(None, None, {}, ["out"])

    assert found.lost == [] and [m.producer.topic for m in found.torn] == ["__consumer_offsets"]
