"""Transaction operations on a live cluster: list, find hanging, abort, LSO.

Behind the ``faust -A app transactions|hanging-transactions|abort-transaction|lso``
commands. The Kafka requests confluent-kafka lacks are spoken directly
(:mod:`kafka_ops.transaction_requests` on :mod:`kafka_ops.wire`); offsets
(:mod:`kafka_ops.offsets`) and fencing go through confluent-kafka. Nothing here
needs Java or the broker jars, only a reachable cluster.

Words used: a transaction is *open* while its coordinator has it Ongoing or is
writing its commit or abort markers; a partition's *LSO* (last stable offset) is
the first offset of its oldest open transaction, or the high watermark; a
transaction is *hanging* when it has been open longer than it should (its own
transaction timeout, or a threshold the operator gives), or when a partition still
holds it open although its coordinator no longer knows it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from kafka_ops.offsets import PartitionKey, PartitionOffsets, admin_end_offsets, read_offsets
from kafka_ops.transaction_requests import (
    OPEN_STATES,
    PartitionProducer,
    Transaction,
    TransactionToolError,
    describe_producers_body,
    describe_transactions_body,
    find_coordinators_body,
    list_transactions_body,
    parse_describe_producers,
    parse_describe_transactions,
    parse_find_coordinators,
    parse_list_transactions,
    parse_write_txn_markers,
    write_markers_body,
)
from kafka_ops.wire import (
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    FIND_COORDINATOR,
    LIST_TRANSACTIONS,
    WRITE_TXN_MARKERS,
    Cluster,
    KafkaWireError,
    error_name,
)
from kafka_ops.wire_security import cluster as wire_cluster

COORDINATOR_RETRIES = 20
RETRIABLE = {14, 15, 51}  # coordinator loading / not available, concurrent transactions
OFFSETS_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class HangingTransaction:
    """An open transaction on one partition, and why it counts as hanging."""

    producer: PartitionProducer
    transaction: Optional[Transaction]  # None: its coordinator does not know it
    reasons: tuple[str, ...]
    blocks_lso: bool
    lso_lag: int


# --- operations ----------------------------------------------------------------


def _retrying(what: str, attempt):
    """Run ``attempt()`` until it returns something other than None (a retriable answer)."""
    for _ in range(COORDINATOR_RETRIES):
        result = attempt()
        if result is not None:
            return result
        time.sleep(0.25)
    raise TransactionToolError(f"{what}: the transaction coordinator stayed unavailable; try again later")


def find_coordinators(cluster: Cluster, transactional_ids: list[str]) -> dict[str, int]:
    """transactional id -> node id of its transaction coordinator."""
    if not transactional_ids:
        return {}

    def attempt() -> Optional[dict[str, int]]:
        _, reader = cluster.bootstrap.call(FIND_COORDINATOR, lambda v: find_coordinators_body(transactional_ids))
        found = parse_find_coordinators(reader)
        for transactional_id, (_, error) in found.items():
            if error in RETRIABLE:
                return None
            if error:
                raise TransactionToolError(
                    f"cannot find the coordinator of transactional id {transactional_id!r}: {error_name(error)}")
        return {key: node_id for key, (node_id, _) in found.items()}

    return _retrying("FindCoordinator", attempt)


def describe_transactions(cluster: Cluster, transactional_ids: list[str]) -> dict[str, Transaction]:
    """The coordinator's view of each id; ids it does not know are left out."""
    by_node: dict[int, list[str]] = {}
    for transactional_id, node_id in find_coordinators(cluster, transactional_ids).items():
        by_node.setdefault(node_id, []).append(transactional_id)
    described: dict[str, Transaction] = {}
    for node_id, ids in sorted(by_node.items()):
        def attempt() -> Optional[list[tuple[int, Transaction]]]:
            _, reader = cluster.connection(node_id).call(DESCRIBE_TRANSACTIONS,
                                                         lambda v: describe_transactions_body(ids))
            states = parse_describe_transactions(reader)
            return None if any(error in RETRIABLE for error, _ in states) else states

        for error, transaction in _retrying("DescribeTransactions", attempt):
            if error == 105:  # TRANSACTIONAL_ID_NOT_FOUND
                continue
            if error:
                raise TransactionToolError(
                    f"cannot describe transactional id {transaction.transactional_id!r}: {error_name(error)}")
            described[transaction.transactional_id] = transaction
    return described


def list_transactions(cluster: Cluster, *, include_closed: bool = False) -> list[Transaction]:
    """Open transactions (every transactional id with ``include_closed``), oldest first."""
    states = () if include_closed else OPEN_STATES  # no filter lists every state
    ids: set[str] = set()
    for _, connection in cluster.each_broker():  # each broker coordinates some transactional ids
        def attempt() -> Optional[list[tuple[str, int, str]]]:
            _, reader = connection.call(LIST_TRANSACTIONS, lambda v: list_transactions_body(states))
            return parse_list_transactions(reader, RETRIABLE)

        ids.update(transactional_id for transactional_id, _, _ in _retrying("ListTransactions", attempt))
    described = describe_transactions(cluster, sorted(ids))
    if not include_closed:  # a transaction may have ended between the two requests
        described = {k: t for k, t in described.items() if t.open}
    return sorted(described.values(), key=lambda t: (t.start_time_ms < 0, t.start_time_ms, t.transactional_id))


def _cluster_metadata(admin: AdminClient) -> Any:
    try:
        return admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise TransactionToolError(f"cannot read the cluster's topics: {exc.args[0].str()}") from None


def topic_names(admin: AdminClient) -> set[str]:
    """Every topic of the cluster, the internal ones too."""
    return set(_cluster_metadata(admin).topics)


def topic_leaders(admin: AdminClient, topics: Optional[list[str]]) -> dict[PartitionKey, int]:
    """(topic, partition) -> leader node id, for ``topics`` (None: every non-internal topic)."""
    metadata = _cluster_metadata(admin)
    if topics is None:
        topics = sorted(t for t in metadata.topics if not t.startswith("__"))
    missing = [t for t in topics if t not in metadata.topics or metadata.topics[t].error is not None]
    if missing:
        raise TransactionToolError(f"no such topic: {', '.join(missing)}")
    return {(topic, p.id): p.leader for topic in topics for p in metadata.topics[topic].partitions.values()}


def describe_producers(cluster: Cluster, leaders: dict[PartitionKey, int]) -> list[PartitionProducer]:
    """Every producer each partition's leader knows (with its open transaction, if any)."""
    by_node: dict[int, dict[str, list[int]]] = {}
    for (topic, partition), node_id in leaders.items():
        by_node.setdefault(node_id, {}).setdefault(topic, []).append(partition)
    producers: list[PartitionProducer] = []
    for node_id, partitions in sorted(by_node.items()):
        _, reader = cluster.connection(node_id).call(DESCRIBE_PRODUCERS, lambda v: describe_producers_body(partitions))
        found, errors = parse_describe_producers(reader)
        if errors:
            (topic, partition), message = next(iter(sorted(errors.items())))
            raise TransactionToolError(f"cannot describe the producers of {topic}-{partition}: {message}")
        producers.extend(found)
    return sorted(producers, key=lambda p: (p.topic, p.partition, p.producer_id))


def partition_offsets(admin: AdminClient, partitions: Iterable[PartitionKey]) -> dict[PartitionKey, PartitionOffsets]:
    """High watermark and last stable offset of each partition (:func:`kafka_ops.offsets.read_offsets`)."""
    try:
        return read_offsets(admin_end_offsets(admin, OFFSETS_TIMEOUT_S), partitions)
    except KafkaException as exc:
        raise TransactionToolError(f"cannot read offsets: {exc.args[0].str()}") from None


def hanging_reasons(producer: PartitionProducer, transaction: Optional[Transaction], now_ms: int,
                    older_than_s: Optional[float]) -> tuple[str, ...]:
    """Why the open transaction of ``producer`` on its partition is hanging (empty: it is not)."""
    if transaction is None or not transaction.open:
        return (f"its coordinator has no open transaction for producer {producer.producer_id}",)
    if (producer.topic, producer.partition) not in transaction.partitions:
        return (f"the coordinator's transaction of {transaction.transactional_id!r} does not include this partition",)
    age = transaction.age_s(now_ms)
    if older_than_s is not None:
        limit, name = older_than_s, "the --older-than threshold"
    else:
        limit, name = transaction.timeout_ms / 1000, "its transaction timeout"
    if age is not None and age > limit:
        return (f"open for {age:.0f} s, longer than {name} ({limit:g} s)",)
    return ()


def find_hanging(cluster: Cluster, admin: AdminClient, topics: Optional[list[str]] = None, *,
                 older_than_s: Optional[float] = None, blocking: bool = False,
                 now_ms: Optional[int] = None) -> list[HangingTransaction]:
    """Open transactions on the partitions of ``topics`` that hang (see :func:`hanging_reasons`).

    With ``blocking``, every open transaction that holds back a partition's LSO is
    reported too, whatever its age.
    """
    leaders = topic_leaders(admin, topics)
    open_here = [p for p in describe_producers(cluster, leaders) if p.in_transaction]
    if not open_here:
        return []
    by_producer = {t.producer_id: t for t in list_transactions(cluster)}
    offsets = partition_offsets(admin, [(p.topic, p.partition) for p in open_here])
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    found = []
    for producer in open_here:
        transaction = by_producer.get(producer.producer_id)
        reasons = hanging_reasons(producer, transaction, now_ms, older_than_s)
        partition = offsets[(producer.topic, producer.partition)]
        blocks_lso = partition.last_stable_offset == producer.txn_start_offset
        if blocking and blocks_lso and not reasons:
            reasons = (f"holds back the LSO at offset {producer.txn_start_offset}",)
        if reasons:
            found.append(HangingTransaction(producer, transaction, reasons, blocks_lso,
                                            partition.lso_lag if blocks_lso else 0))
    if not found:
        return []
    # A short transaction may have ended between the partition's answer and the
    # coordinator's: keep only what the partitions still hold open at the same offset.
    still_open = {(p.topic, p.partition, p.producer_id, p.txn_start_offset)
                  for p in describe_producers(cluster, {(h.producer.topic, h.producer.partition):
                                                        leaders[(h.producer.topic, h.producer.partition)]
                                                        for h in found})
                  if p.in_transaction}
    return [h for h in found
            if (h.producer.topic, h.producer.partition, h.producer.producer_id, h.producer.txn_start_offset)
            in still_open]


def abort_by_transactional_id(client: Mapping[str, Any], transaction: Transaction, timeout_s: float = 60.0) -> None:
    """Abort ``transaction`` through its coordinator by fencing its producer.

    A new producer session with the same transactional id makes the coordinator
    abort the open transaction (markers on every partition) and bump the epoch:
    the old producer can no longer write under that id.
    """
    producer = Producer({
        **client,
        "transactional.id": transaction.transactional_id,
        "transaction.timeout.ms": transaction.timeout_ms,  # keep the id's timeout as it was
        "log_level": 3,  # errors only: retries while the coordinator aborts are expected
    })
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as exc:
        raise TransactionToolError(
            f"could not abort the transaction of {transaction.transactional_id!r}: {exc.args[0].str()}") from None
    finally:
        producer.flush(0)


def abort_on_partition(cluster: Cluster, admin: AdminClient, topic: str, partition: int,
                       producer_id: Optional[int] = None) -> PartitionProducer:
    """Write an abort marker for the open transaction on one partition (WriteTxnMarkers).

    For a hanging transaction its coordinator no longer knows: only the
    partition's leader can close it. Returns the producer whose transaction it was.
    """
    leaders = topic_leaders(admin, [topic])
    if (topic, partition) not in leaders:
        raise TransactionToolError(f"topic {topic} has no partition {partition}")
    open_here = [p for p in describe_producers(cluster, {(topic, partition): leaders[(topic, partition)]})
                 if p.in_transaction and (producer_id is None or p.producer_id == producer_id)]
    if not open_here:
        which = f" of producer {producer_id}" if producer_id is not None else ""
        raise TransactionToolError(f"no open transaction{which} on {topic}-{partition}")
    if len(open_here) > 1:
        ids = ", ".join(str(p.producer_id) for p in open_here)
        raise TransactionToolError(f"{topic}-{partition} has open transactions of producers {ids}: pass --producer-id")
    producer = open_here[0]
    write_marker(cluster, leaders[(topic, partition)], producer, committed=False)
    return producer


def write_marker(cluster: Cluster, leader: int, producer: PartitionProducer, committed: bool,
                 producer_epoch: Optional[int] = None) -> None:
    """Write a commit or abort marker for ``producer`` on its partition, through the partition's ``leader``."""
    tp = (producer.topic, producer.partition)
    _, reader = cluster.connection(leader).call(
        WRITE_TXN_MARKERS, lambda v: write_markers_body(producer, committed, producer_epoch))
    error = parse_write_txn_markers(reader).get(tp)
    if error is None:
        raise TransactionToolError(f"the leader of {tp[0]}-{tp[1]} did not answer for that partition")
    if error:
        kind = "commit" if committed else "abort"
        raise TransactionToolError(f"the leader of {tp[0]}-{tp[1]} refused the {kind} marker: {error_name(error)}")


def abort_marker_written(producer: PartitionProducer) -> str:
    """What :func:`abort_on_partition` did, in one line for the operator."""
    return (f"wrote an abort marker for producer {producer.producer_id} on {producer.topic}-{producer.partition} "
            f"(transaction from offset {producer.txn_start_offset})")


def connect(client: Mapping[str, Any]) -> tuple[Cluster, AdminClient]:
    """A protocol connection and an admin client from librdkafka settings; an unreachable cluster raises one line."""
    try:
        cluster = wire_cluster(client)
    except KafkaWireError as exc:
        raise TransactionToolError(str(exc)) from None
    return cluster, AdminClient(dict(client))


# --- rows for the commands' tables ---------------------------------------------------


def _age(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def _partitions(partitions: Iterable[PartitionKey]) -> str:
    return " ".join(f"{topic}-{partition}" for topic, partition in partitions) or "-"


TRANSACTION_HEADERS = ("transactional id", "producer id", "epoch", "state", "age", "timeout", "partitions")


def transaction_rows(transactions: list[Transaction], now_ms: int) -> list[tuple[str, ...]]:
    return [(t.transactional_id, str(t.producer_id), str(t.producer_epoch), t.state, _age(t.age_s(now_ms)),
             f"{t.timeout_ms / 1000:g} s", _partitions(t.partitions)) for t in transactions]


HANGING_HEADERS = ("partition", "transactional id", "producer id", "start offset", "blocks LSO", "LSO lag", "age",
                   "why")


def hanging_rows(hanging: list[HangingTransaction], now_ms: int) -> list[tuple[str, ...]]:
    rows = []
    for h in hanging:
        p, t = h.producer, h.transaction
        age = t.age_s(now_ms) if t is not None else None
        rows.append((f"{p.topic}-{p.partition}", t.transactional_id if t else "(unknown)", str(p.producer_id),
                     str(p.txn_start_offset), "yes" if h.blocks_lso else "no", str(h.lso_lag), _age(age),
                     "; ".join(h.reasons)))
    return rows


LSO_HEADERS = ("partition", "high watermark", "LSO", "LSO lag", "held by")


def lso_rows(offsets: list[PartitionOffsets], producers: list[PartitionProducer]) -> list[tuple[str, ...]]:
    """One row per partition; ``held by`` names the producer whose open transaction starts at the LSO."""
    holders = {(p.topic, p.partition, p.txn_start_offset): p.producer_id for p in producers if p.in_transaction}
    rows = []
    for o in offsets:
        holder = holders.get((o.topic, o.partition, o.last_stable_offset)) if o.lso_lag else None
        rows.append((f"{o.topic}-{o.partition}", str(o.high_watermark), str(o.last_stable_offset), str(o.lso_lag),
                     f"producer {holder}" if holder is not None else "-"))
    return rows


def lso_table(cluster: Cluster, admin: AdminClient, topics: list[str]) -> list[tuple[str, ...]]:
    """The rows of :data:`LSO_HEADERS` for every partition of ``topics``."""
    leaders = topic_leaders(admin, topics)
    return lso_rows(list(partition_offsets(admin, leaders).values()), describe_producers(cluster, leaders))
