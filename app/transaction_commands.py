"""Transaction operations against a live cluster: ``faust -A app <command> --help``.

``transactions``, ``hanging-transactions``, ``abort-transaction``, ``lost-markers``
and ``lso`` speak the Kafka protocol from Python (:mod:`kafka_ops.transactions`): they need no
Java and no broker jars, only the cluster at KAFKA_BOOTSTRAP_SERVERS (or the
local broker). ``faust --json -A app <command>`` prints JSON instead of tables.
"""
from __future__ import annotations

import sys
import time
from typing import NoReturn, Optional

import click
from confluent_kafka.admin import AdminClient
from faust.cli import AppCommand, argument, option

from app import app
from config import settings
from kafka_ops import transactions as txn
from kafka_ops.lost_markers import find_lost_markers, write_lost_markers
from kafka_ops.wire import Cluster, KafkaWireError


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fail(command: AppCommand, message: str) -> NoReturn:
    command.say(f"error: {message}", file=sys.stderr)
    sys.exit(1)


class _Operation:
    """Connects to the cluster for a block; any failure prints one ``error:`` line and exits 1."""

    def __init__(self, command: AppCommand) -> None:
        self.command = command

    def __enter__(self) -> tuple[Cluster, AdminClient]:
        try:
            self.cluster, admin = txn.connect(settings.kafka_client())
        except txn.TransactionToolError as exc:
            _fail(self.command, str(exc))
        return self.cluster, admin

    def __exit__(self, kind, exc, tb) -> Optional[bool]:
        self.cluster.close()
        if isinstance(exc, (txn.TransactionToolError, KafkaWireError)):
            _fail(self.command, str(exc))
        return None


def _rows_or_none(command: AppCommand, rows: list, headers: tuple, title: str, none: str) -> None:
    if rows or command.json:
        command.say(command.tabulate(rows, headers=headers, title=title))
    else:
        command.say(none)


@app.command(
    option("--all", "include_closed", is_flag=True, help="Every transactional id, whatever its state."),
)
async def transactions(self: AppCommand, include_closed: bool) -> None:
    """List open transactions with their age and partitions (ListTransactions, DescribeTransactions).

    Needs only a reachable cluster (pure Python; no Java or broker jars).
    """
    with _Operation(self) as (cluster, _):
        found = txn.list_transactions(cluster, include_closed=include_closed)
    _rows_or_none(self, txn.transaction_rows(found, _now_ms()), txn.TRANSACTION_HEADERS,
                  "Transactions" if include_closed else "Open transactions", "no open transactions")


@app.command(
    option("--topic", "topics", multiple=True, help="Only these topics (repeatable); default: every topic."),
    option("--older-than", type=float, default=None,
           help="Seconds; default: each transaction's own transaction timeout."),
    option("--blocking", is_flag=True,
           help="Also report every open transaction holding back an LSO, whatever its age."),
)
async def hanging_transactions(self: AppCommand, topics: tuple[str, ...], older_than: Optional[float],
                               blocking: bool) -> None:
    """Find hanging transactions: open too long, or unknown to their coordinator (DescribeProducers).

    Needs only a reachable cluster (pure Python; no Java or broker jars).
    """
    if older_than is not None and older_than < 0:
        _fail(self, "--older-than must be 0 or more seconds")
    with _Operation(self) as (cluster, admin):
        found = txn.find_hanging(cluster, admin, list(topics) or None, older_than_s=older_than, blocking=blocking)
    _rows_or_none(self, txn.hanging_rows(found, _now_ms()), txn.HANGING_HEADERS, "Hanging transactions",
                  "no hanging transactions")


@app.command(
    option("--transactional-id", default=None, help="Abort the open transaction of this id (fences its producer)."),
    option("--topic", default=None, help="With --partition: abort the open transaction on that partition."),
    option("--partition", type=int, default=None),
    option("--producer-id", type=int, default=None, help="With --topic: which producer, if several are open there."),
    option("--yes", is_flag=True, help="Do not ask for confirmation (for scripts)."),
)
async def abort_transaction(self: AppCommand, transactional_id: Optional[str], topic: Optional[str],
                            partition: Optional[int], producer_id: Optional[int], yes: bool) -> None:
    """Abort one open transaction, by transactional id or by partition.

    By id, a new producer session for the id makes its coordinator abort the
    transaction on all its partitions and fences the old producer. By partition
    (--topic, --partition), an abort marker is written straight to the partition
    (WriteTxnMarkers): for a hanging transaction its coordinator no longer knows.
    Needs only a reachable cluster (pure Python; no Java or broker jars).
    """
    if (transactional_id is None) == (topic is None) or (topic is None) != (partition is None):
        _fail(self, "give either --transactional-id, or --topic and --partition")
    with _Operation(self) as (cluster, admin):
        if transactional_id is not None:
            found = txn.describe_transactions(cluster, [transactional_id]).get(transactional_id)
            if found is None:
                raise txn.TransactionToolError(f"transactional id {transactional_id!r} is unknown to its coordinator")
            if found.state != "Ongoing":  # Prepare*: its coordinator is already ending it
                raise txn.TransactionToolError(
                    f"transactional id {transactional_id!r} has no ongoing transaction to abort (state {found.state})")
            partitions = list(found.partitions)
            what = (f"the ongoing transaction of {transactional_id!r} (producer {found.producer_id}, "
                    f"open {found.age_s(_now_ms()) or 0:.1f} s) on {len(partitions)} partition(s)")
        else:
            partitions = [(topic, partition)]
            what = f"the open transaction on {topic}-{partition}"
        if not yes and not _confirm(f"Abort {what}?"):
            _fail(self, "nothing aborted (confirm, or pass --yes)")
        if transactional_id is not None:
            txn.abort_by_transactional_id(settings.kafka_client(), found)
            self.say(f"aborted the transaction of {transactional_id!r}; its producer is fenced")
        else:
            self.say(txn.abort_marker_written(txn.abort_on_partition(cluster, admin, topic, partition, producer_id)))
        offsets = txn.partition_offsets(admin, partitions)
    for o in offsets.values():
        self.say(f"{o.topic}-{o.partition}: LSO {o.last_stable_offset}, high watermark {o.high_watermark}, "
                 f"LSO lag {o.lso_lag}")


@app.command(
    option("--topic", "topics", multiple=True,
           help="Only these topics (repeatable); default: every topic, with __consumer_offsets."),
    option("--write", is_flag=True, help="Write the markers found (needs ClusterAction on the cluster)."),
    option("--yes", is_flag=True, help="With --write: do not ask for confirmation (for scripts)."),
)
async def lost_markers(self: AppCommand, topics: tuple[str, ...], write: bool, yes: bool) -> None:
    """Find, and with --write write, the transaction markers a broker lost.

    A partition that holds open a transaction its coordinator has finished waits
    for ever (Kafka 4.4.0 can do this after a restart). The coordinator's log
    (__transaction_state) says whether it committed or aborted it; this writes that
    marker, as the coordinator would have. Aborting such a transaction instead
    would throw away what was committed, unless the broker already aborted part of
    it (a torn transaction): that one is aborted whole. Needs only a reachable cluster.
    """
    with _Operation(self) as (cluster, admin):
        found = find_lost_markers(cluster, admin, settings.kafka_client(), list(topics) or None)
        lost = found.lost
        for marker in found.torn:
            self.say(f"{marker.describe()}; another of its partitions is committed, so no marker can make it "
                     "whole: left open. Its events are partly applied: rebuild what reads them from their input")
        for hanging in found.undecided:
            p = hanging.producer
            self.say(f"{p.topic}-{p.partition}: producer {p.producer_id} holds a transaction open that its "
                     f"coordinator has ended, and its log has no decision for it: see hanging-transactions")
        if not lost:
            self.say("no lost markers")
            return
        for marker in lost:
            self.say(marker.describe())
        if not write:
            self.say(f"{len(lost)} lost marker(s); write them with --write")
            return
        if not yes and not _confirm(f"Write these {len(lost)} marker(s)?"):
            _fail(self, "nothing written (confirm, or pass --yes)")
        write_lost_markers(cluster, admin, lost)
        offsets = txn.partition_offsets(admin, [(m.producer.topic, m.producer.partition) for m in lost])
    self.say(f"wrote {len(lost)} marker(s)")
    for o in offsets.values():
        self.say(f"{o.topic}-{o.partition}: LSO {o.last_stable_offset}, high watermark {o.high_watermark}, "
                 f"LSO lag {o.lso_lag}")


def _confirm(question: str) -> bool:
    try:
        return click.confirm(question, default=False)
    except click.Abort:  # no answer: end of input
        click.echo("", err=True)
        return False


@app.command(
    argument("topics", nargs=-1, required=True),
)
async def lso(self: AppCommand, topics: tuple[str, ...]) -> None:
    """Show each partition's high watermark, last stable offset (LSO) and LSO lag, and who holds the LSO.

    Needs only a reachable cluster (pure Python; no Java or broker jars).
    """
    with _Operation(self) as (cluster, admin):
        rows = txn.lso_table(cluster, admin, list(topics))
    self.say(self.tabulate(rows, headers=txn.LSO_HEADERS, title="Last stable offsets"))
