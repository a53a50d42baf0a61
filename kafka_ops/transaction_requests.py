"""The transaction requests of the Kafka protocol: request bodies and response parsers.

ListTransactions, FindCoordinator (for transactional ids), DescribeTransactions,
DescribeProducers and WriteTxnMarkers, on :mod:`kafka_ops.wire`; and what they
describe (:class:`Transaction`, :class:`PartitionProducer`). No I/O here: the
operations are in :mod:`kafka_ops.transactions`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from kafka_ops.offsets import PartitionKey
from kafka_ops.wire import NO_TAGS, Reader, compact_array, compact_string, error_name, int8, int16, int32, int64

OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")
TRANSACTION_KEY = 1  # FindCoordinator key type of a transactional id


class TransactionToolError(RuntimeError):
    """An operation could not be done; the message is one line for the operator."""


@dataclass(frozen=True)
class Transaction:
    """A transactional id as its coordinator describes it."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[PartitionKey, ...]

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES

    def age_s(self, now_ms: int) -> Optional[float]:
        """Seconds the open transaction has been open; None when none is."""
        return (now_ms - self.start_time_ms) / 1000 if self.open and self.start_time_ms >= 0 else None


@dataclass(frozen=True)
class PartitionProducer:
    """A producer a partition's leader knows, with its open transaction if any."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    txn_start_offset: int  # -1: no open transaction on this partition
    last_timestamp_ms: int

    @property
    def in_transaction(self) -> bool:
        return self.txn_start_offset >= 0


# --- requests ----------------------------------------------------------------


def list_transactions_body(states: Iterable[str]) -> bytes:
    """ListTransactions v0: state filters, no producer id filter."""
    return compact_array(list(states), compact_string) + compact_array([], int64) + NO_TAGS


def parse_list_transactions(reader: Reader, retriable: Iterable[int] = ()) -> Optional[list[tuple[str, int, str]]]:
    """(transactional id, producer id, state) of each listed transaction; None for a ``retriable`` error."""
    reader.int32()  # throttle_time_ms
    error = reader.int16()
    if error in retriable:
        return None
    if error:
        raise TransactionToolError(f"ListTransactions failed: {error_name(error)}")
    reader.compact_array(reader.compact_string)  # unknown state filters

    def entry() -> tuple[str, int, str]:
        transactional_id, producer_id, state = reader.compact_string(), reader.int64(), reader.compact_string()
        reader.tags()
        return transactional_id or "", producer_id, state or ""

    entries = reader.compact_array(entry)
    reader.tags()
    return entries


def find_coordinators_body(transactional_ids: list[str]) -> bytes:
    """FindCoordinator v4+: one batch of transactional ids."""
    return int8(TRANSACTION_KEY) + compact_array(transactional_ids, compact_string) + NO_TAGS


def parse_find_coordinators(reader: Reader) -> dict[str, tuple[int, int]]:
    """transactional id -> (coordinator node id, error code)."""
    reader.int32()  # throttle_time_ms

    def coordinator() -> tuple[str, int, int]:
        key = reader.compact_string() or ""
        node_id = reader.int32()
        reader.compact_string()  # host
        reader.int32()  # port
        error = reader.int16()
        reader.compact_string()  # error message
        reader.tags()
        return key, node_id, error

    found = {key: (node_id, error) for key, node_id, error in reader.compact_array(coordinator)}
    reader.tags()
    return found


def describe_transactions_body(transactional_ids: list[str]) -> bytes:
    return compact_array(transactional_ids, compact_string) + NO_TAGS


def parse_describe_transactions(reader: Reader) -> list[tuple[int, Transaction]]:
    """(error code, transaction) for each transactional id asked about."""
    reader.int32()  # throttle_time_ms

    def topic() -> list[PartitionKey]:
        name = reader.compact_string() or ""
        partitions = reader.compact_array(reader.int32)
        reader.tags()
        return [(name, p) for p in partitions]

    def state() -> tuple[int, Transaction]:
        error = reader.int16()
        transactional_id = reader.compact_string() or ""
        txn_state = reader.compact_string() or ""
        timeout_ms, start_ms = reader.int32(), reader.int64()
        producer_id, producer_epoch = reader.int64(), reader.int16()
        partitions = tuple(sorted(tp for tps in reader.compact_array(topic) for tp in tps))
        reader.tags()
        return error, Transaction(transactional_id, txn_state, producer_id, producer_epoch, timeout_ms, start_ms,
                                  partitions)

    states = reader.compact_array(state)
    reader.tags()
    return states


def describe_producers_body(partitions: dict[str, list[int]]) -> bytes:
    def topic(item: tuple[str, list[int]]) -> bytes:
        return compact_string(item[0]) + compact_array(item[1], int32) + NO_TAGS

    return compact_array(sorted(partitions.items()), topic) + NO_TAGS


def parse_describe_producers(reader: Reader) -> tuple[list[PartitionProducer], dict[PartitionKey, str]]:
    """The producers of each partition, and the partitions that answered with an error."""
    reader.int32()  # throttle_time_ms
    producers: list[PartitionProducer] = []
    errors: dict[PartitionKey, str] = {}

    def topic() -> None:
        name = reader.compact_string() or ""

        def partition() -> None:
            index, error = reader.int32(), reader.int16()
            message = reader.compact_string()

            def producer() -> None:
                producer_id, producer_epoch = reader.int64(), reader.int32()
                reader.int32()  # last_sequence
                last_timestamp_ms, coordinator_epoch, txn_start_offset = reader.int64(), reader.int32(), reader.int64()
                reader.tags()
                producers.append(PartitionProducer(name, index, producer_id, producer_epoch, coordinator_epoch,
                                                   txn_start_offset, last_timestamp_ms))

            reader.compact_array(producer)
            reader.tags()
            if error:
                errors[(name, index)] = message or error_name(error)

        reader.compact_array(partition)
        reader.tags()

    reader.compact_array(topic)
    reader.tags()
    return producers, errors


def write_markers_body(producer: PartitionProducer, committed: bool, producer_epoch: Optional[int] = None) -> bytes:
    """WriteTxnMarkers v1: one commit or abort marker for ``producer`` on its partition.

    ``producer_epoch`` defaults to the epoch the partition knows the producer by.
    """
    epoch = producer.producer_epoch if producer_epoch is None else producer_epoch
    topic = compact_string(producer.topic) + compact_array([producer.partition], int32) + NO_TAGS
    marker = (int64(producer.producer_id) + int16(epoch) + int8(1 if committed else 0)  # transaction_result
              + compact_array([topic], lambda t: t) + int32(max(producer.coordinator_epoch, 0)) + NO_TAGS)
    return compact_array([marker], lambda m: m) + NO_TAGS


def parse_write_txn_markers(reader: Reader) -> dict[PartitionKey, int]:
    """partition -> error code of the marker written there."""
    results: dict[PartitionKey, int] = {}

    def marker() -> None:
        reader.int64()  # producer_id

        def topic() -> None:
            name = reader.compact_string() or ""

            def partition() -> None:
                index, error = reader.int32(), reader.int16()
                reader.tags()
                results[(name, index)] = error

            reader.compact_array(partition)
            reader.tags()

        reader.compact_array(topic)
        reader.tags()

    reader.compact_array(marker)
    reader.tags()
    return results
