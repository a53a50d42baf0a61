"""Exactly-once for Faust: the transport that replaces Faust's own transaction handling.

Faust keeps doing what it does well (consuming, streams, tables, recovery with
``read_committed`` readers); this module changes four things:

* **Delivery**: each input record is handed to the agents once per ownership
  of its partition, and a commit never passes a record not yet processed
  (:mod:`faust_eos.delivery`).

* **Sends** made while an agent processes an event are not produced at once:
  they are staged with the event's partition and offset (:mod:`faust_eos.staging`).
  Table changelog writes go the same way.
* **Commits** run one transaction per input partition
  (:class:`faust_eos.transaction.PartitionTransaction`): the staged records of
  the events being committed, then their offsets.
* **Ownership**: a partition's producer is initialised when the partition is
  assigned, before its offsets are read and its tables restored, which fences
  the previous owner. Before giving partitions up in a rebalance the worker
  finishes the events it holds and commits them, so the next owner starts
  exactly where this one stopped.

Local table state that may hold effects of transactions that never committed
(after a crash, a fence or an abort) is wiped and restored from the changelog,
and a restore ends once it has applied the changelog's last committed record
(:meth:`faust_eos.offsets.CommittedOffsets.restore_ends`).
"""
from __future__ import annotations

import asyncio
import logging
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Optional, Set

from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaException
from faust.streams import current_event
from faust.transport.consumer import TransactionManager as FaustTransactionManager
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.types.tuples import FutureMessage, RecordMetadata

from faust_eos import faust_internals
from faust_eos.commit import PartitionCommits
from faust_eos.delivery import Delivery
from faust_eos.faust_internals import ConsumerHooks
from faust_eos.outside import OutsideEventSends, outside_transactional_id, worker_id
from faust_eos.staging import UNBOUND, Source, SourceTP, StagedRecord, Staging
from faust_eos.store import Store as ExpiringStore, expires_windows
from faust_eos.offsets import CommittedOffsets
from faust_eos.transaction import PartitionTransaction, TransactionStuck, transactional_id

log = logging.getLogger(__name__)
faust_internals.require_tested_versions()

CLEAN_SHUTDOWN_MARKER = ".eos-clean-shutdown"
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


class SendNotCommittable(RuntimeError):
    """A record was sent, or waited for, in a way exactly-once cannot commit."""


class CommitFuture(asyncio.Future):
    """Resolves with a record's metadata once its transaction commits.

    Awaited while the agent still processes the event that sent the record, it
    would wait for ever (the commit waits for that event to finish): that raises
    :class:`SendNotCommittable` instead.
    """

    def __init__(self, *, loop: asyncio.AbstractEventLoop, sent_in: Any) -> None:
        super().__init__(loop=loop)
        self._sent_in = sent_in

    def __await__(self) -> Any:
        if not self.done() and self._sent_in is not None and current_event() is self._sent_in:
            raise wait_inside_event_refused()
        return super().__await__()

    __iter__ = __await__


class StoreCannotExpire(RuntimeError):
    """A windowed table with expiry is on a store whose expiry would not reach its changelog."""


class MissingTopic(RuntimeError):
    """Records are sent to a topic the cluster lacks, and this app may not create it."""


def wait_inside_event_refused() -> SendNotCommittable:
    return SendNotCommittable(
        "waiting for a record sent while an agent processes an event (send_and_wait, or awaiting send()'s "
        "future) would wait for the commit that waits for that event to finish: under exactly_once send() "
        "and go on; its future resolves when the transaction commits"
    )


class TransactionManager(FaustTransactionManager):
    """Stages sends by source event and commits them per input partition."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.staging = Staging()
        self._transactions: dict[SourceTP, PartitionTransaction] = {}
        self._commits = PartitionCommits(self.staging, self._transactions, lambda: self.consumer.request_rejoin())
        self._group: Any = None
        self._committed: Optional[CommittedOffsets] = None
        self._ownership = asyncio.Lock()  # commits never overlap a change of owned partitions
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="eos-offsets")
        self._transaction_timeout_ms = transaction_timeout_ms(self.app.conf.broker)
        self.outside = OutsideEventSends(self._new_outside_transaction)
        # changelog partition -> the input partition whose events write it
        self._changelog_sources: dict[tuple[str, int], SourceTP] = {}
        self._topics_seen: set[str] = set()
        self._topics_to_declare: set[str] = set()

    # -- lifecycle -----------------------------------------------------------
    async def on_start(self) -> None:
        refuse_tables_that_cannot_expire(self.app.tables.values())
        wipe_tables_after_unclean_stop(Path(self.app.conf.tabledir))
        self._committed = CommittedOffsets(self._bootstrap_servers(), self.app.conf.id)
        self._group = self._committed.group_metadata()

    async def on_stop(self) -> None:
        await super().on_stop()
        for transaction in self._transactions.values():
            transaction.close()
        self._transactions.clear()
        self.outside.close()
        if self._committed is not None:
            self._committed.interrupt()  # a read still running gives up, so the close soon follows
            self._threads.submit(self._committed.close)
        self._threads.shutdown(wait=False)

    def stopped_cleanly(self) -> bool:
        """True if every staged record was committed and no local state is dirty."""
        return not len(self.staging) and self._commits.settled()

    # -- sends -----------------------------------------------------------------
    async def send(
        self,
        topic: str,
        key: Optional[bytes],
        value: Optional[bytes],
        partition: Optional[int],
        timestamp: Optional[float],
        headers: Any,
        *,
        transactional_id: Optional[str] = None,
    ) -> Awaitable[RecordMetadata]:
        """Stage a record; the returned future resolves when its transaction commits."""
        future = CommitFuture(loop=self.loop, sent_in=current_event())

        def committed(metadata: RecordMetadata) -> None:
            future.set_result(metadata)

        self.stage(topic, key, value, partition, timestamp, headers, committed)
        return future

    async def send_and_wait(
        self,
        topic: str,
        key: Optional[bytes],
        value: Optional[bytes],
        partition: Optional[int],
        timestamp: Optional[float],
        headers: Any,
        *,
        transactional_id: Optional[str] = None,
    ) -> RecordMetadata:
        """Outside an event: commit the record now and return its metadata. Inside one: refused."""
        if current_event() is not None:
            raise wait_inside_event_refused()
        self._note_topic(topic)
        await self._declare_new_topics()
        return await self.outside.send_and_wait(_record(topic, key, value, partition, timestamp, headers, UNBOUND))

    def stage_future_message(self, fut: FutureMessage) -> None:
        """Stage a record from ``Topic.send_soon`` (e.g. a table changelog write)."""
        message = fut.message

        def committed(metadata: RecordMetadata) -> None:
            fut.set_result(metadata)
            if message.callback:
                message.callback(fut)

        self.stage(
            message.channel.get_topic_name(),
            message.key,
            message.value,
            message.partition,
            message.timestamp,
            message.headers,
            committed,
        )

    def stage(self, topic, key, value, partition, timestamp, headers, committed) -> None:
        """Stage a record with the transaction it belongs to.

        Sent while an agent processes an event: with that event's input
        partition, up to its offset. A table changelog write outside an event
        (a window's expiry): with the input partition whose events write that
        table partition, in its next transaction. Any other record outside an
        event (a timer, a web view): in this worker's own next transaction
        (:mod:`faust_eos.outside`).
        """
        self._note_topic(topic)
        event = current_event()
        changelog = (topic, partition) if topic in self.app.tables.changelog_topics else None
        if event is not None:
            source = Source(event.message.topic, event.message.partition, event.message.offset)
            if changelog is not None:
                self._changelog_sources[changelog] = SourceTP(source.topic, source.partition)
        elif changelog is not None:
            source = self._changelog_source(changelog)
        else:
            self.outside.add(_record(topic, key, value, partition, timestamp, headers, UNBOUND, committed))
            return
        self.staging.add(source, _record(topic, key, value, partition, timestamp, headers, source.offset, committed))

    def _changelog_source(self, changelog: tuple[str, int]) -> Source:
        """Where a changelog write made outside an event commits: its table partition's input partition."""
        tp = self._changelog_sources.get(changelog)
        if tp is None:
            topic, partition = changelog
            raise SendNotCommittable(
                f"a write to {topic}[{partition}] outside any event, before any event of this worker "
                "wrote that table partition: under exactly_once a table write commits with the input "
                "partition that writes the table"
            )
        return Source(tp.topic, tp.partition, UNBOUND)

    def _note_topic(self, topic: str) -> None:
        if topic in self._topics_seen:
            return
        self._topics_seen.add(topic)
        if topic not in self.app.tables.changelog_topics:  # Faust creates changelogs itself
            self._topics_to_declare.add(topic)

    async def _declare_new_topics(self) -> None:
        """Create the topics records are sent to that the cluster lacks, as Faust would declare them."""
        conf = self.app.conf
        while self._topics_to_declare:
            topic = next(iter(self._topics_to_declare))
            if conf.topic_allow_declare:
                try:
                    await self.create_topic(topic, conf.topic_partitions, conf.topic_replication_factor)
                except AioKafkaError as exc:
                    raise self._missing(topic, f"the cluster refused to create it ({exc})") from exc
            elif not await self._in_thread(self._committed.topic_exists, topic):
                raise self._missing(topic, "it does not exist, and this app may not create topics "
                                           "(topic_allow_declare=False)")
            self._topics_to_declare.discard(topic)

    def _missing(self, topic: str, why: str) -> MissingTopic:
        partitions = self.app.conf.topic_partitions
        line = (f"records are sent to topic {topic!r}, but {why}: create it with {partitions} partitions, "
                "or let this app create topics")
        log.error(line)
        return MissingTopic(line)

    async def flush(self) -> None:
        """Nothing to flush: records leave only inside commits."""

    # -- commits ---------------------------------------------------------------
    async def commit(self, offsets: Mapping[TP, int], start_new_transaction: bool = True) -> bool:
        """Commit ``offsets`` (next offset to read, per input partition) with their records.

        One transaction per partition (:mod:`faust_eos.commit`); True if every one committed.
        """
        await self._declare_new_topics()
        source_offsets = {SourceTP(tp.topic, tp.partition): offset for tp, offset in offsets.items()}
        async with self._ownership:
            committed = await self._commits.run(source_offsets)
        self.consumer.count_committed(sum(committed.values()))
        return all(committed.values())

    async def commit_outside_events(self, committable: Callable[[TP], Optional[int]]) -> None:
        """Commit what no input event caused, once per commit round.

        Table writes made outside an event go with their input partition's next
        transaction, even when it has no new offset to commit (``committable``:
        how far that partition may commit now); other records in this worker's own.
        """
        unbound = {}
        for tp in self.staging.unbound():
            offset = committable(TP(tp.topic, tp.partition))
            if offset is not None:  # else not positioned yet: a later round takes them
                unbound[TP(tp.topic, tp.partition)] = offset
        if unbound:
            await self.commit(unbound)
        if len(self.outside):
            await self._declare_new_topics()
            await self.outside.commit()

    # -- ownership -------------------------------------------------------------
    async def on_partitions_revoked(self, revoked: Set[TP]) -> None:
        """Faust forgot the revoked partitions' pending offsets: drop their records and producers.

        Nothing of theirs may commit any more: events processed after the hand-over
        commit had their records dropped, and events the streams skip while the
        rebalance runs may be acknowledged unprocessed.
        """
        gone = {SourceTP(tp.topic, tp.partition) for tp in revoked}
        for tp in gone & self.staging.pending():
            self._commits.give_up(tp, f"{tp.topic}[{tp.partition}] revoked before commit")
        async with self._ownership:
            for tp in gone & self._transactions.keys():
                self._transactions.pop(tp).close()

    def owns(self, tp: TP) -> bool:
        """Whether this worker claimed input partition ``tp`` in the current assignment."""
        return SourceTP(tp.topic, tp.partition) in self._transactions

    async def on_rebalance(self, assigned: Set[TP], revoked: Set[TP], newly_assigned: Set[TP]) -> None:
        """Wipe dirty state, then claim every assigned input partition afresh.

        Even a partition this worker keeps is claimed again: if the worker was
        out of the group for a while (paused, cut off), another owner may have
        claimed it meanwhile, and the old producer would only be fenced later.
        """
        async with self._ownership:
            for transaction in self._transactions.values():
                transaction.close()
            self._transactions.clear()
            if self._commits.dirty:
                await self._wipe_table_partitions(self._commits.dirty)
                self._commits.dirty.clear()
            claim = [
                SourceTP(tp.topic, tp.partition)
                for tp in assigned
                if not self.app.assignor.is_standby(tp) and tp.topic not in self.app.tables.changelog_topics
            ]
            await asyncio.gather(*(self._claim(tp) for tp in claim))

    async def _claim(self, tp: SourceTP) -> None:
        transaction = self._new_transaction(tp, transactional_id(self.app.conf.id, tp))
        try:
            await transaction.init()
        except (KafkaException, TransactionStuck) as exc:
            # Unclaimed, the partition's events cannot commit: ask for another rebalance.
            log.warning("Could not claim %s, rejoining the group: %s", transaction.transactional_id, exc)
            transaction.close()
            self.consumer.request_rejoin()
            return
        self._transactions[tp] = transaction
        log.info("Claimed %s (fenced any previous owner)", transaction.transactional_id)

    async def _wipe_table_partitions(self, partitions: Iterable[int]) -> None:
        recovery = self.app.tables.recovery
        assigned = self.consumer.assignment()
        rewind: set[TP] = set()
        for table in self.app.tables.values():
            store = table.data
            changelog = table.changelog_topic.get_topic_name()
            per_partition = hasattr(store, "partition_path")  # RocksDB; other stores are wiped whole
            if not per_partition:
                store.reset_state()
            wiped = partitions if per_partition else {tp.partition for tp in assigned if tp.topic == changelog}
            for partition in wiped:
                if per_partition:
                    faust_internals.close_table_partition(store, partition)
                    shutil.rmtree(store.partition_path(partition), ignore_errors=True)
                # recovery remembers how far it restored a partition it keeps: make it start over
                tp = TP(changelog, partition)
                recovery.revoke(tp)
                rewind.add(tp)
                log.warning("Wiped %s partition %d: it held uncommitted effects", table.name, partition)
        # The changelog reader of a partition this worker keeps is still at its end, and
        # Faust's recovery takes "position at the end" for "restored": rewind it.
        rewind &= assigned
        if rewind:
            await self.consumer.seek_to_beginning(*rewind)

    async def stable_committed_offsets(self, tps: Iterable[TP]) -> dict[TP, Optional[int]]:
        """The group's committed offsets, once no transaction still holds them pending."""
        tps = list(tps)
        if not tps:
            return {}
        return await self._in_thread(self._committed.read, tps)

    async def restore_ends(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Per changelog partition, the offset just past its last committed record."""
        tps = list(tps)
        return await self._in_thread(self._committed.restore_ends, tps) if tps else {}

    # -- helpers ---------------------------------------------------------------
    def _new_transaction(self, tp: Optional[SourceTP], txn_id: str) -> PartitionTransaction:
        return PartitionTransaction(
            tp,
            transactional_id=txn_id,
            producer_config=self._producer_config(),
            group=self._group,
            call_timeout_s=min(10.0, self._transaction_timeout_ms / 1000 / 3),
        )

    def _new_outside_transaction(self) -> PartitionTransaction:
        worker = worker_id(Path(self.app.conf.datadir))
        return self._new_transaction(None, outside_transactional_id(self.app.conf.id, worker))

    def _bootstrap_servers(self) -> str:
        return ",".join(f"{url.host}:{url.port or 9092}" for url in self.app.conf.broker)

    def _producer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self._bootstrap_servers(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 1,
            "transaction.timeout.ms": self._transaction_timeout_ms,
            "partitioner": "murmur2_random",  # the Java client's partitioner, as Faust uses
            "retry.backoff.ms": 20,
        }

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await self.loop.run_in_executor(self._threads, fn, *args)


def transaction_timeout_ms(broker_urls: Iterable[Any]) -> int:
    """The ``transaction_timeout_ms`` option of the broker URL, if given.

    ``eos://localhost:9092?transaction_timeout_ms=30000``: how long the broker lets
    one of this app's transactions stay open before aborting it; at most the
    brokers' ``transaction.max.timeout.ms``.
    """
    for url in broker_urls:
        if "transaction_timeout_ms" in url.query:
            value = url.query["transaction_timeout_ms"]
            if not value.isdigit() or int(value) == 0:
                raise ValueError(f"transaction_timeout_ms={value!r} in the broker URL: expected milliseconds, e.g. 60000")
            return int(value)
    return DEFAULT_TRANSACTION_TIMEOUT_MS


def _record(topic, key, value, partition, timestamp, headers, source_offset, committed=None) -> StagedRecord:
    if isinstance(headers, Mapping):
        headers = list(headers.items())
    return StagedRecord(
        topic=topic,
        key=key,
        value=value,
        partition=partition,
        timestamp_ms=int(timestamp * 1000) if timestamp else None,
        headers=headers or None,
        source_offset=source_offset,
        on_committed=committed or (lambda metadata: None),
    )


def refuse_tables_that_cannot_expire(tables: Iterable[Any]) -> None:
    """Raise :class:`StoreCannotExpire` for a table whose window expiry would not reach its changelog."""
    for table in tables:
        if expires_windows(table) and not isinstance(table.data, ExpiringStore):
            raise StoreCannotExpire(
                f"table {table.name!r} expires old windows, which its store deletes locally only (restores "
                "would bring them back): under exactly_once give it the store 'eos-rocksdb://' "
                "(faust.App(store=...) or app.Table(..., store=...))"
            )


def wipe_tables_after_unclean_stop(tabledir: Path) -> None:
    """Delete local table state unless the last worker here stopped cleanly."""
    marker = tabledir / CLEAN_SHUTDOWN_MARKER
    if marker.exists():
        marker.unlink()
    elif tabledir.exists() and any(tabledir.iterdir()):
        log.warning("Last stop of this worker was not clean: wiping %s, tables restore from changelogs", tabledir)
        shutil.rmtree(tabledir)


class Consumer(ConsumerHooks):
    """Faust's consumer, committing what it holds before partitions move.

    Under exactly-once, what its agents are handed and how far a commit reaches
    is decided by :class:`faust_eos.delivery.Delivery`, not by Faust's read
    offsets and gaps: each input record is handed out once per ownership of its
    partition, and a commit never passes a record that was not processed.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self.delivery = Delivery()
        #: input partitions whose offsets really committed since start: one per transaction
        #: under exactly_once, one per partition of an offset commit the group accepted otherwise
        self.partitions_committed = 0

    def count_committed(self, partitions: int) -> None:
        """Count commits that succeeded; Faust records offsets as committed even when a commit fails."""
        self.partitions_committed += partitions

    async def commit_to_group(self, offsets: Mapping[TP, int]) -> bool:
        accepted = await super().commit_to_group(offsets)
        if accepted:
            self.count_committed(len(offsets))
        return accepted

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        committed = await super().force_commit(topics, start_new_transaction=start_new_transaction)
        if self.in_transaction:
            await self.transactions.commit_outside_events(self.delivery.committable)
        return committed

    async def on_partitions_revoked(self, revoked: Set[TP]) -> None:
        # Faust forgets revoked partitions' processed-but-uncommitted offsets,
        # so their events would be processed again by the next owner.
        if self.assignment():
            # finish the events already handed to agents and commit them
            self.stop_flow()
            await self.wait_empty()
            await self._commit_all_processed()
            log.info("Handing over partitions; committed offsets: %s",
                     _offsets_text(faust_internals.committed_offsets(self)))
        self.delivery.close()  # nothing more is handed out or committed until the next positioning
        await super().on_partitions_revoked(revoked)

    async def fetch_batch(self, active_partitions: Optional[Set[TP]], timeout: float) -> Mapping[TP, list]:
        if not self.in_transaction:
            return await super().fetch_batch(active_partitions, timeout)
        started = self.delivery.fetch_started()
        records = await super().fetch_batch(active_partitions, timeout)
        offered, ignored = self.delivery.fetched(records, started)
        for tp in ignored:
            resume = self.delivery.resume_point(tp)
            if resume is not None:
                await self._seek_source(tp, resume)
        return offered

    def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        fetched = super().getmany(timeout)
        return self._admitted(fetched) if self.in_transaction else fetched

    async def _admitted(self, fetched: AsyncIterator[tuple[TP, Any]]) -> AsyncIterator[tuple[TP, Any]]:
        changelogs = self.app.tables.changelog_topics
        async for tp, message in fetched:
            if tp.topic in changelogs or self._admit(tp, message):
                yield tp, message

    def _admit(self, tp: TP, message: Any) -> bool:
        # Until a rebalance is over, a record handed out may never be processed: Faust
        # resumes its flow control several times while recovery runs, and every resume
        # empties the streams' queues; its streams skip events while flow control is
        # suspended or from an older generation (the pure-Python stream acknowledges them
        # unprocessed, so a commit would pass them; the compiled one leaves them
        # unacknowledged, so every later commit would wait). Such records wait here.
        if (
            self.app.rebalancing
            or not self.app.flow_control.is_active()
            or message.generation_id != self.app.consumer_generation_id
        ):
            return False
        return self.delivery.admit(tp, message)

    async def note_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        # Under exactly-once, offsets that hold no record are Delivery's business.
        if not self.in_transaction:
            await super().note_gap(tp, offset_from, offset_to)

    def committable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        if not self.in_transaction:
            return super().committable_offsets(tps)
        offsets = {}
        committed_offsets = faust_internals.committed_offsets(self)
        for tp in tps:
            offset = self.delivery.committable(tp)
            committed = committed_offsets[tp]
            if offset is not None and (committed is None or offset > committed):
                offsets[tp] = offset
            if committed is not None:  # Faust's own ack lists decide nothing here: keep them short
                faust_internals.forget_acks_below(self, tp, committed)
        return offsets

    async def seek_to_committed(self) -> Mapping[TP, Optional[int]]:
        if self.in_transaction:
            return await self._position_sources()
        offsets = await super().seek_to_committed()
        sources = {tp: offset for tp, offset in offsets.items() if tp.topic not in self.app.tables.changelog_topics}
        log.info("Resuming from committed offsets: %s", _offsets_text(sources))
        return offsets

    async def highwaters(self, *partitions: TP) -> Mapping[TP, int]:
        # Faust's recovery asks where each changelog ends and takes a partition as
        # restored once it has applied the record just before that end. Faust reads
        # the end from the last fetch response, which may not exist yet for a partition
        # just assigned; and under transactions the offsets before the end hold commit
        # markers, not records. Asked of the broker: the offset past the last committed record.
        if self.in_transaction:
            return await self.transactions.restore_ends(partitions)
        return await super().highwaters(*partitions)

    async def position(self, tp: TP) -> Optional[int]:
        if self.in_transaction and tp.topic in self.app.tables.changelog_topics:
            # Faust's recovery asks this only to guess, after a quiet spell, that what is
            # left of a changelog is transaction markers, and then skips to its end. The
            # consumer's position runs ahead of records not yet applied (fetched, or
            # queued for the tables), which that guess skipped. highwaters() says where
            # the last record is, so no guess is needed: answer how far recovery applied.
            recovery = self.app.tables.recovery
            applied = recovery.active_offsets.get(tp, recovery.standby_offsets.get(tp))
            return -1 if applied is None else applied
        return await super().position(tp)

    async def seek_to_beginning(self, *partitions: TP) -> None:
        # declared by Faust's consumer but left unimplemented by its aiokafka driver
        aio_partitions = [AioTopicPartition(tp.topic, tp.partition) for tp in partitions]
        await self.call_on_consumer_thread(self.aiokafka_consumer().seek_to_beginning, *aio_partitions)

    def topic_partitions(self, topic: str) -> Optional[int]:
        # Right after Faust creates a changelog topic, the consumer's metadata can list
        # it with no partitions, and Faust's check of a table's partitions against its
        # source topic then fails on every event, for minutes. Unknown (None) skips the
        # check until a metadata refresh, asked for here, brings the real count.
        count = super().topic_partitions(topic)
        if count == 0:
            self.refresh_metadata()
            return None
        return count

    async def _seek_source(self, tp: TP, offset: int) -> None:
        """Seek an input partition; Delivery ignores its records from fetches that overlap the seek."""
        with self.delivery.seeking(tp):
            await self.seek_partition(tp, offset)

    async def seek_partition(self, tp: TP, offset: int) -> None:
        # On the consumer's own thread: a seek from this one races with a fetch
        # in progress there (aiokafka then fails with a KeyError in its fetcher).
        await self.call_on_consumer_thread(self.aiokafka_consumer().seek, tp, offset)

    async def _position_sources(self) -> Mapping[TP, Optional[int]]:
        """Seek each owned input partition to where handing out resumes; return the committed offsets.

        Faust calls this when recovery completes, and again whenever it fetches
        while the flow is stopped. The first time in an assignment a partition
        starts at its stable committed offset (a plain offset fetch can return
        the offset before a transaction whose commit markers are still being
        written; this one waits for them), or at its first offset if the group
        never committed it. Later it resumes after the last record handed out.
        """
        generation = self.app.consumer_generation_id
        # Only claimed partitions: a claim fences the previous owner, after which its committed offset is final.
        sources = [
            tp
            for tp in self.assignment()
            if tp.topic not in self.app.tables.changelog_topics and self.transactions.owns(tp)
        ]
        never_positioned = [tp for tp in sources if self.delivery.resume_point(tp) is None]
        try:
            committed = await self.transactions.stable_committed_offsets(sources)
            never_committed = [tp for tp in never_positioned if committed.get(tp) is None]
            first_offsets = await self.earliest_offsets(*never_committed) if never_committed else {}
        except (KafkaException, AioKafkaError) as exc:
            # The broker is away for longer than the reads wait (a restart on a busy machine).
            # Unpositioned partitions hand nothing out; the next assignment positions them.
            log.warning("Could not read where to resume (%s); rejoining the group to try again", exc)
            self.request_rejoin()
            return {}
        started: dict[TP, int] = {}
        resumed: dict[TP, int] = {}
        for tp in sources:
            if tp in never_positioned:
                start = committed.get(tp)
                started[tp] = start if start is not None else first_offsets[tp]
            elif (resume := self.delivery.resume_point(tp)) is not None:
                resumed[tp] = resume

        def still_owned(tp: TP) -> bool:  # else a rebalance overtook this; the next positioning starts afresh
            return self.app.consumer_generation_id == generation and self.transactions.owns(tp)

        for tp, offset in {**started, **resumed}.items():
            if not still_owned(tp):
                continue
            await self._seek_source(tp, offset)
            if tp in started and still_owned(tp):
                self.delivery.position(tp, offset)
        if started:
            log.info("Resuming from committed offsets: %s", _offsets_text(started))
        if resumed:
            log.info("Resuming after the records already handed out: %s", _offsets_text(resumed))
        return committed

    async def _commit_all_processed(self, attempts: int = 5) -> None:
        # commit() only joins a commit already running, which may have started
        # before the last events were processed: repeat until none is left
        for _ in range(attempts):
            if not self._processed_uncommitted():
                return
            await self.commit()

    def _processed_uncommitted(self) -> bool:
        if self.in_transaction:
            return bool(self.committable_offsets(self.assignment()))
        return faust_internals.has_pending_acks(self)

    async def on_stop(self) -> None:
        await super().on_stop()
        if self.in_transaction and self.transactions.stopped_cleanly():
            tabledir = Path(self.app.conf.tabledir)
            tabledir.mkdir(parents=True, exist_ok=True)
            (tabledir / CLEAN_SHUTDOWN_MARKER).touch()


def _offsets_text(offsets: Mapping[TP, Optional[int]]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]={offset}" for tp, offset in sorted(offsets.items()))


class Producer(faust_aiokafka.Producer):
    """Faust's producer; under exactly-once every send goes through the transactions.

    Faust's topics already send through the transaction manager under
    exactly-once; this covers the rest: buffered sends (table changelog writes)
    and code that calls ``app.producer`` itself.
    """

    def send_soon(self, fut: FutureMessage) -> None:
        if self.app.in_transaction:
            self.app.consumer.transactions.stage_future_message(fut)
        else:
            super().send_soon(fut)

    async def send(self, topic: str, key: Any, value: Any, partition: Optional[int], timestamp: Optional[float],
                   headers: Any, *, transactional_id: Optional[str] = None) -> Awaitable[RecordMetadata]:
        if self.app.in_transaction:
            return await self.app.consumer.transactions.send(topic, key, value, partition, timestamp, headers)
        return await super().send(topic, key, value, partition, timestamp, headers,
                                  transactional_id=transactional_id)

    async def send_and_wait(self, topic: str, key: Any, value: Any, partition: Optional[int],
                            timestamp: Optional[float], headers: Any, *,
                            transactional_id: Optional[str] = None) -> RecordMetadata:
        if self.app.in_transaction:
            return await self.app.consumer.transactions.send_and_wait(topic, key, value, partition, timestamp,
                                                                      headers)
        return await super().send_and_wait(topic, key, value, partition, timestamp, headers,
                                           transactional_id=transactional_id)


class Transport(faust_aiokafka.Transport):
    """``eos://host:port``: Kafka through aiokafka, with exactly-once that holds."""

    Consumer = Consumer
    Producer = Producer
    TransactionManager = TransactionManager
