"""Commit and abort markers a broker lost: found in its transaction log, and written again.

A transaction ends when its coordinator writes a marker on each of its
partitions. Kafka 4.4.0 can skip them around a restart (docs/limitations.md):
the coordinator has finished the transaction, yet its partitions
still hold it open, their last stable offset (LSO) stays behind it for good, and
a ``read_committed`` reader, or a worker restoring a table from such a
changelog, waits for ever. Aborting it would throw away what the coordinator
committed, unless the broker already aborted part of it (:func:`tearing_abort`).
Which marker is missing is written in the coordinator's own log,
``__transaction_state``: each change of a transactional id's state is a record
there, the decision to commit or to abort among them (PrepareCommit,
PrepareAbort, with the transaction's partitions).

:func:`find_lost_markers` finds the open transactions their coordinator has
ended and looks up its decision; :func:`write_lost_markers` writes that marker
(WriteTxnMarkers, as the coordinator would have). Writing markers needs the
ClusterAction permission on the cluster.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_ops.offsets import PartitionKey
from kafka_ops.transaction_requests import PartitionProducer, TransactionToolError
from kafka_ops.transactions import HangingTransaction, find_hanging, topic_leaders, topic_names, write_marker
from kafka_ops.wire import Cluster, Reader

TRANSACTION_LOG = "__transaction_state"
GROUP_OFFSETS = "__consumer_offsets"  # a transaction's offset commit waits for its marker there too
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
          "PrepareEpochFence")
DECISIONS = {"PrepareCommit": True, "PrepareAbort": False}  # state -> committed
LOG_READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LoggedState:
    """One record of the transaction log: a transactional id's state after one change."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    partitions: frozenset[PartitionKey]
    start_time_ms: int
    update_time_ms: int


@dataclass(frozen=True)
class LostMarker:
    """A partition holding open a transaction its coordinator has decided, and that decision.

    ``torn_by``: the abort of the producer's next transaction, which the broker let write into
    this committed transaction's open partitions and so aborted part of it (:func:`tearing_abort`).
    Such a transaction is aborted whole: committing the rest would commit its input offsets
    without the outputs the broker threw away.
    """

    producer: PartitionProducer
    decision: LoggedState
    torn_by: Optional[LoggedState] = None

    @property
    def committed(self) -> bool:
        return DECISIONS[self.decision.state] and self.torn_by is None

    def describe(self) -> str:
        """One line for the operator."""
        p, d = self.producer, self.decision
        line = (f"{p.topic}-{p.partition}: {'commit' if self.committed else 'abort'} marker of "
                f"{d.transactional_id!r} (producer {p.producer_id}, transaction from offset {p.txn_start_offset})")
        if self.torn_by is not None:
            line += (": committed by its coordinator, but the broker aborted it on "
                     f"{_partitions_text(self.torn_by.partitions & d.partitions)} with the next transaction")
        return line


def decode_log_record(key: Optional[bytes], value: Optional[bytes]) -> Optional[LoggedState]:
    """A record of the transaction log; None for a tombstone."""
    if not key or value is None:
        return None
    key_reader = Reader(key)
    if key_reader.int16() != 0:
        raise TransactionToolError(f"unknown transaction log key version in {key!r}")
    transactional_id = key_reader.string() or ""
    reader = Reader(value)
    version = reader.int16()
    if version not in (0, 1):
        raise TransactionToolError(f"unknown transaction log value version {version} for {transactional_id!r}")
    flexible = version >= 1
    string = reader.compact_string if flexible else reader.string
    array = reader.compact_array if flexible else reader.array
    producer_id, producer_epoch = reader.int64(), reader.int16()
    reader.int32()  # transaction timeout
    status = reader.int8()

    def topic() -> list[PartitionKey]:
        name = string() or ""
        partitions = array(reader.int32)
        if flexible:
            reader.tags()
        return [(name, p) for p in partitions]

    partitions = frozenset(tp for tps in array(topic) for tp in tps)
    update_time_ms, start_time_ms = reader.int64(), reader.int64()
    state = STATES[status] if 0 <= status < len(STATES) else f"unknown ({status})"
    return LoggedState(transactional_id, producer_id, producer_epoch, state, partitions, start_time_ms,
                       update_time_ms)


def read_transaction_log(client: Mapping[str, Any], timeout_s: float = LOG_READ_TIMEOUT_S) -> list[LoggedState]:
    """Every state record of the transaction log, in log order within each of its partitions."""
    consumer = Consumer({**client, "group.id": "faust-eos-ops-transaction-log", "enable.auto.commit": False,
                         "log_level": 3})
    try:
        metadata = consumer.list_topics(TRANSACTION_LOG, timeout=timeout_s).topics.get(TRANSACTION_LOG)
        if metadata is None or metadata.error is not None:
            raise TransactionToolError(f"cannot read {TRANSACTION_LOG}: "
                                       f"{metadata.error if metadata else 'no such topic'}")
        ends = {}
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(TRANSACTION_LOG, partition), timeout=timeout_s)
            if high > low:
                ends[partition] = (low, high)
        consumer.assign([TopicPartition(TRANSACTION_LOG, p, low) for p, (low, _) in ends.items()])
        records: list[LoggedState] = []
        unread = {p: high for p, (_, high) in ends.items()}
        deadline = time.monotonic() + timeout_s
        while unread:
            if time.monotonic() > deadline:
                raise TransactionToolError(f"{TRANSACTION_LOG} was not read to its end in {timeout_s:g} s")
            for message in consumer.consume(500, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                state = decode_log_record(message.key(), message.value())
                if state is not None:
                    records.append(state)
                if message.offset() + 1 >= unread.get(message.partition(), 0):
                    unread.pop(message.partition(), None)
        return records
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        raise TransactionToolError(f"cannot read {TRANSACTION_LOG}: {error.str()}") from None
    finally:
        consumer.close()


def decision_for(producer: PartitionProducer, log: list[LoggedState]) -> Optional[LoggedState]:
    """The coordinator's decision on the transaction ``producer`` holds open on its partition.

    That is the producer's last PrepareCommit or PrepareAbort naming the partition: a
    marker written for any later transaction of it there would have closed the partition.
    None when the log has none. This trusts the log to hold every transaction its
    coordinator began, as it does unless the log itself lost records.
    """
    tp = (producer.topic, producer.partition)
    decisions = [s for s in log
                 if s.state in DECISIONS and s.producer_id == producer.producer_id
                 # with transaction.version 2 the coordinator bumps the epoch when it decides
                 and s.producer_epoch in (producer.producer_epoch, producer.producer_epoch + 1)
                 and tp in s.partitions]
    return decisions[-1] if decisions else None


def tearing_abort(decision: LoggedState, log: list[LoggedState]) -> Optional[LoggedState]:
    """The abort that tore a committed transaction, or None.

    While a committed transaction's markers are missing, its partitions still hold it
    open, and its producer's next transaction (the same producer id and, under
    transaction.version 1, the same epoch) writes into that same open stretch of every
    partition the two share. When the coordinator aborts the next transaction, its
    abort markers on the shared partitions abort the committed transaction's records
    there too. Kafka 4.4.0 did this after a SIGTERM (docs/limitations.md).
    """
    if not DECISIONS[decision.state]:
        return None
    later = [s for s in log if s.transactional_id == decision.transactional_id
             and s.producer_id == decision.producer_id and s.start_time_ms > decision.start_time_ms]
    if not later:
        return None
    following = min(s.start_time_ms for s in later)
    decided = [s for s in later if s.start_time_ms == following and s.state in DECISIONS]
    if decided and not DECISIONS[decided[-1].state] and decided[-1].partitions & decision.partitions:
        return decided[-1]
    return None


def ended_by_coordinator(hanging: HangingTransaction) -> bool:
    """The coordinator no longer has this partition in an open transaction of its producer."""
    t, p = hanging.transaction, hanging.producer
    return t is None or not t.open or (p.topic, p.partition) not in t.partitions


def find_lost_markers(cluster: Cluster, admin: AdminClient, client: Mapping[str, Any],
                      topics: Optional[list[str]] = None) -> LostMarkers:
    """Open transactions their coordinator has ended: those its log decides, and those it does not.

    A committed transaction the broker tore (:func:`tearing_abort`) is aborted whole,
    if every partition of it already closed is one the tearing abort reached; if
    another one closed (with its commit marker), neither marker can make it whole,
    and its open partitions are left as they are, in :attr:`LostMarkers.torn`.
    ``topics`` defaults to every topic but the internal ones, with the group offsets.
    """
    if topics is None:
        topics = sorted(t for t in topic_names(admin) if not t.startswith("__") or t == GROUP_OFFSETS)
    found = LostMarkers([], [], [])
    ended = [h for h in find_hanging(cluster, admin, topics) if ended_by_coordinator(h)]
    if not ended:
        return found
    log = read_transaction_log(client)
    decided = []
    for hanging in ended:
        decision = decision_for(hanging.producer, log)
        if decision is None:
            found.undecided.append(hanging)
        else:
            decided.append(LostMarker(hanging.producer, decision, tearing_abort(decision, log)))
    still_open: dict[LoggedState, set[PartitionKey]] = {}
    for marker in decided:
        still_open.setdefault(marker.decision, set()).add((marker.producer.topic, marker.producer.partition))
    for marker in decided:
        torn_by, decision = marker.torn_by, marker.decision
        closed = decision.partitions - still_open[decision]
        if torn_by is None or closed <= torn_by.partitions:
            found.lost.append(marker)
        else:
            found.torn.append(marker)
    return found


@dataclass
class LostMarkers:
    """What :func:`find_lost_markers` found."""

    #: markers to write, each as its coordinator decided (a torn commit: an abort)
    lost: list[LostMarker]
    #: open transactions their coordinator ended, with no decision in its log
    undecided: list[HangingTransaction]
    #: partitions of committed transactions the broker tore past mending: no marker is written there
    torn: list[LostMarker]


def _partitions_text(partitions: frozenset[PartitionKey]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in sorted(partitions))


def write_lost_markers(cluster: Cluster, admin: AdminClient, lost: list[LostMarker]) -> None:
    """Write each lost marker on its partition, as its coordinator decided."""
    leaders = topic_leaders(admin, sorted({m.producer.topic for m in lost}))
    for marker in lost:
        p = marker.producer
        write_marker(cluster, leaders[(p.topic, p.partition)], p, marker.committed, marker.decision.producer_epoch)
