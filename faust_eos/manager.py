"""The transaction manager: where every record sent under exactly-once goes, and how it commits.

Sends are staged with the input event that caused them (:mod:`faust_eos.staging`),
or, outside any event, with the worker's own producer (:mod:`faust_eos.outside`);
each commit round runs one transaction per input partition (:mod:`faust_eos.commit`).
Partitions are claimed here when assigned, which fences their previous owner.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Set

from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import KafkaException
from faust.streams import current_event
from faust.transport.consumer import TransactionManager as FaustTransactionManager
from faust.types import TP
from faust.types.tuples import FutureMessage, RecordMetadata

from faust_eos import faust_internals
from faust_eos.commit import PartitionCommits
from faust_eos.errors import (
    MissingTopic,
    SendNotCommittable,
    SettingRefused,
    StoreCannotExpire,
    wait_inside_event_refused,
)
from faust_eos.offsets import CommittedOffsets
from faust_eos.outside import OutsideEventSends, outside_transactional_id, worker_id
from faust_eos.staging import UNBOUND, Source, SourceTP, StagedRecord, Staging
from faust_eos.store import Store as ExpiringStore, expires_windows
from faust_eos.transaction import PartitionTransaction, TransactionStuck, transactional_id

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".eos-clean-shutdown"
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


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
        self._changelog_topics: frozenset[str] = frozenset()  # set at start, read for every record staged

    # -- lifecycle -----------------------------------------------------------
    async def on_start(self) -> None:
        # every table registered itself when declared; Faust's own property builds a new set each call
        self._changelog_topics = frozenset(self.app.tables.changelog_topics)
        refuse_settings_that_bypass_transactions(self.app.conf)
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
        changelog = (topic, partition) if topic in self._changelog_topics else None
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
        if topic not in self._changelog_topics:  # Faust creates changelogs itself
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


def refuse_settings_that_bypass_transactions(conf: Any) -> None:
    """Raise :class:`SettingRefused` for a Faust setting under which records would skip their event's transaction."""
    if conf.stream_publish_on_commit:
        raise SettingRefused(
            "stream_publish_on_commit=True makes Faust send an event's records when offsets commit, outside the "
            "event, so they could not commit with it: leave it off under exactly_once (the records are held "
            "until their transaction commits anyway)"
        )


def refuse_tables_that_cannot_expire(tables: Iterable[Any]) -> None:
    """Raise :class:`StoreCannotExpire` for a table whose window expiry would not reach its changelog."""
    for table in tables:
        if expires_windows(table) and not isinstance(table.data, ExpiringStore):
            raise StoreCannotExpire(
                f"table {table.name!r} expires old windows, which its store deletes locally only (restores "
                "would bring them back): under exactly_once give the app store='eos-rocksdb://' (Faust ignores "
                "a table's own store URL when nothing follows its scheme)"
            )


def wipe_tables_after_unclean_stop(tabledir: Path) -> None:
    """Delete local table state unless the last worker here stopped cleanly."""
    marker = tabledir / CLEAN_SHUTDOWN_MARKER
    if marker.exists():
        marker.unlink()
    elif tabledir.exists() and any(tabledir.iterdir()):
        log.warning("Last stop of this worker was not clean: wiping %s, tables restore from changelogs", tabledir)
        shutil.rmtree(tabledir)
