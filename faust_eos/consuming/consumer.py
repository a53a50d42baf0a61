"""The consumer: what the agents are handed, and how far a commit reaches, under both guarantees.

Faust's aiokafka consumer (through :class:`faust_eos.faust_internals.ConsumerHooks`,
with the answers its table recovery needs: :mod:`faust_eos.consuming.recovery_reads`),
with delivery decided by :class:`faust_eos.consuming.delivery.Delivery`, input partitions
positioned at their stable committed offsets, changelogs reaching Faust's recovery
one fetched batch at a time, input batches for agents that take them whole
(:mod:`faust_eos.short_paths.batches`), a commit of what it holds before partitions move,
no new input handed out while ``max_uncommitted_records`` wait for their commit,
and timer commits that keep the commit interval's pace (:mod:`faust_eos.consuming.timer`).
"""
from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
from typing import Any, AsyncIterator, Iterable, Mapping, Optional, Set, cast

from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import KafkaException
from faust.types import TP
from mode import ServiceT

from faust_eos import faust_internals, metrics
from faust_eos.committing.at_least_once import AtLeastOnce, PlainProducer
from faust_eos.committing.exactly_once import TransactionManager
from faust_eos.committing.guarantee import Guarantee
from faust_eos.committing.offsets import CommittedOffsets
from faust_eos.committing.produce import producer_config
from faust_eos.consuming.delivery import Delivery
from faust_eos.consuming.recovery_reads import RecoveryReads
from faust_eos.consuming.timer import commit_every
from faust_eos.errors import LocalStateNotWritten, OffsetsLost
from faust_eos.options import FETCH_MIN_BYTES, fetch_max_wait_ms, gc_threshold, max_uncommitted_records
from faust_eos.security import librdkafka_client
from faust_eos.short_paths.adoption import adopt
from faust_eos.short_paths.batches import Batch, batch_records, batched_topics
from faust_eos.short_paths.event_path import EventPaths
from faust_eos.state.store import Store
from faust_eos.state.table_state import TableState

log = logging.getLogger(__name__)


class Consumer(RecoveryReads):
    """Faust's consumer, committing what it holds before partitions move.

    Under both guarantees, what its agents are handed and how far a commit reaches
    is decided by :class:`faust_eos.consuming.delivery.Delivery`, not by Faust's read
    offsets and gaps: each input record is handed out once per ownership of its
    partition, and a commit never passes a record that was not processed.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        adopt(self.app)  # made as the worker starts, before its agents: their topics and tables take the short paths
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(gc_threshold(self.app.conf.broker), older, oldest)
        self.delivery = Delivery()
        #: the short path of sends and table operations inside the event being processed
        self.event_paths = EventPaths(self.staging_for_sends, lambda: self.app.sensors, self._commit_early_if_full)
        #: input partitions whose offsets really committed since start: one per transaction
        #: under exactly_once, one per partition of an offset commit the group accepted otherwise
        self.partitions_committed = 0
        self._guarantee: Optional[Guarantee] = None
        self._early_commit: Optional[Any] = None  # the task of a commit started before the interval ends
        #: changelog topic -> the store applying its fetched batches whole (see _condensed)
        self._batch_restoring_stores: Optional[dict[str, Store]] = None
        #: topic -> records per batch, None if handed out one by one (see _condensed)
        self._batched_topics: dict[str, Optional[int]] = {}
        self._max_uncommitted = max_uncommitted_records(self.app.conf.broker)
        self._commit_ended = asyncio.Event()  # set as each commit ends: there may be room again
        self._no_wait_until = 0.0  # loop time before which input is handed out even at the limit
        self._commits_begun = 0

    def fetch_wait_ms(self) -> int:
        return fetch_max_wait_ms(self.app.conf.broker)

    def fetch_min_bytes(self) -> int:
        return FETCH_MIN_BYTES

    @property
    def guarantee(self) -> Guarantee:
        """Where the records of this worker's events wait and how they commit, chosen once, from Faust's
        ``processing_guarantee``: the transaction manager under exactly_once, :class:`AtLeastOnce` otherwise."""
        if self._guarantee is None:  # first asked as the worker starts: every table is declared by then
            self._guarantee = self._chosen_guarantee()
        return self._guarantee

    def _chosen_guarantee(self) -> Guarantee:
        if self.in_transaction:
            return cast(TransactionManager, self.transactions)
        conf = self.app.conf
        return AtLeastOnce(TableState(self.app.tables.values(), other_stores_allowed=True),
                           PlainProducer(producer_config(conf)), self, max_uncommitted_records(conf.broker),
                           lambda: CommittedOffsets(librdkafka_client(conf), conf.id), loop=self.loop,
                           beacon=self.beacon)

    def on_init_dependencies(self) -> Iterable[ServiceT]:
        """The guarantee runs as a service of the consumer's (Faust starts its transaction manager only so)."""
        return [cast(ServiceT, self.guarantee)]

    def staging_for_sends(self) -> Optional[Guarantee]:
        """Where a record sent now is staged; None if it takes Faust's path."""
        guarantee = self.guarantee
        return guarantee if guarantee.accepts_sends() else None

    def sensors_read_records(self) -> bool:
        path = self.event_paths.current()
        return path is None or path.sensors_read_records

    async def run_commit_timer(self) -> None:
        await commit_every(self.commit_interval, self.commit, clock=self.loop.time, sleep=self.sleep,
                           stopped=lambda: self.should_stop)

    def commit_early(self) -> None:
        """Start a commit before the interval ends: the records waiting for their commit reached the limit."""
        if self._early_commit is None:
            # in a context of its own: the commit is no part of the event being processed
            self._early_commit = self.loop.create_task(self._commit_early(), context=contextvars.Context())

    def _commit_early_if_full(self) -> None:
        if self.uncommitted_records() >= self._max_uncommitted:
            self.commit_early()

    async def _commit_early(self) -> None:
        try:
            await self.commit()
        except LocalStateNotWritten as exc:
            await self.crash(exc)  # the worker stops, as when a timer commit raises it
        except Exception:
            log.exception("An early commit failed; the next interval commits")
        finally:
            self._early_commit = None

    def count_committed(self, partitions: int) -> None:
        """Count commits that succeeded; Faust records offsets as committed even when a commit fails."""
        self.partitions_committed += partitions
        metrics.input_partitions_committed.inc(partitions)

    async def commit_to_group(self, offsets: Mapping[TP, int]) -> bool:
        # Faust commits to the group itself only without transactions (exactly-once commits in its
        # transaction manager): the at-least-once guarantee writes the events' records first.
        return await self.guarantee.commit(offsets)

    async def commit_offsets_to_group(self, offsets: Mapping[TP, int]) -> bool:
        return await super().commit_to_group(offsets)

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        self._commits_begun += 1
        try:
            committed: bool = await super().force_commit(topics, start_new_transaction=start_new_transaction)
            await self.guarantee.commit_outside_events(self.delivery.committable)
        finally:
            self._commit_ended.set()
        return committed

    def uncommitted_records(self) -> int:
        """How many records (outputs and table writes) wait for their commit."""
        return self.guarantee.uncommitted()

    async def _wait_for_room(self) -> None:
        """While ``max_uncommitted_records`` wait for their commit, hand out no new input: commit first.

        The agents go on with what they were handed, so the events whose records
        wait can finish and commit, and memory stays bounded however far the agents
        could run ahead of the commits. A commit begun during the wait that commits
        nothing (its events still run, or it failed: under exactly-once its partition
        is given up, under at-least-once committed again only once it has a new
        offset) ends the wait, and the next one waits no sooner than a commit interval
        later: while at-least-once commits fail, input goes on and memory grows, as
        without the limit. A rebalance or a stop ends it too.
        """
        loop = self.loop
        if loop.time() < self._no_wait_until:
            return
        started = loop.time()
        try:
            await self._until_room(loop)
        finally:
            metrics.input_paused.inc(loop.time() - started)

    async def _until_room(self, loop: asyncio.AbstractEventLoop) -> None:
        while (self.uncommitted_records() >= self._max_uncommitted and self.app.flow_control.is_active()
               and not self.should_stop):
            begun_before, committed_before = self._commits_begun, self.partitions_committed
            self.commit_early()
            self._commit_ended.clear()
            try:
                await asyncio.wait_for(self._commit_ended.wait(), timeout=self.commit_interval)
            except asyncio.TimeoutError:
                continue  # a long commit: look at the flow and the count again
            if self._commits_begun == begun_before:
                continue  # the commit that ended began before this look, with fewer events done: commit again
            if self.partitions_committed == committed_before:
                self._no_wait_until = loop.time() + self.commit_interval
                return

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
        self.guarantee.drop(revoked)

    async def fetch_batch(self, active_partitions: Optional[Set[TP]], timeout: float) -> Mapping[TP, list[Any]]:
        started = self.delivery.fetch_started()
        records = await super().fetch_batch(active_partitions, timeout)
        offered, ignored = self.delivery.fetched(records, started)
        for tp in ignored:
            resume = self.delivery.resume_point(tp)
            if resume is not None:
                await self._seek_source(tp, resume)
        return self._condensed(offered)

    def _condensed(self, records: Mapping[TP, list[Any]]) -> Mapping[TP, list[Any]]:
        """Each fetched batch Faust need not see record by record, as one record.

        A changelog batch becomes its last record, the rest left with the table's
        store to apply with it; a batch of a topic with the Batches schema, or whose
        channels unpack batches (:mod:`faust_eos.short_paths.unpacking`), becomes one record
        whose value is the whole :class:`~faust_eos.short_paths.batches.Batch`.
        """
        if self._batch_restoring_stores is None:  # the tables are all declared before any fetch
            self._batch_restoring_stores = {
                table.changelog_topic.get_topic_name(): table.data
                for table in self.app.tables.values()
                if isinstance(table.data, Store) and table.data.restores_in_batches()
            }
        stores = self._batch_restoring_stores
        condensed = {}
        for tp, batch in records.items():
            if len(batch) > 1 and (store := stores.get(tp.topic)) is not None:
                store.precede(tp.partition, batch[-1].offset, batch[:-1])
                batch = batch[-1:]
            elif batch and (max_records := self._records_per_batch(tp.topic)) is not None:
                batch = batch_records(batch, max_records)
            condensed[tp] = batch
        return condensed

    def _records_per_batch(self, topic: str) -> Optional[int]:
        """How many records of ``topic`` go in one batch; None if they are handed out one by one."""
        if topic not in self._batched_topics:  # subscribed since the last look: look at every subscription again
            self._batched_topics = batched_topics(self.app.topics)
            # a changelog's records go to its table's recovery, which takes them one by one
            self._batched_topics.update(dict.fromkeys(self.app.tables.changelog_topics))
            self._batched_topics.setdefault(topic, None)
        return self._batched_topics[topic]

    def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        return self._admitted(super().getmany(timeout))

    async def _admitted(self, fetched: AsyncIterator[tuple[TP, Any]]) -> AsyncIterator[tuple[TP, Any]]:
        changelogs = self.app.tables.changelog_topics
        async for tp, message in fetched:
            if tp.topic in changelogs:
                yield tp, message
                continue
            if self.uncommitted_records() >= self._max_uncommitted:
                await self._wait_for_room()
            if self._admit(tp, message):
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
        batch = message.value
        return self.delivery.admit(tp, message, batch.first_offset if isinstance(batch, Batch) else None)

    async def note_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        """Offsets that hold no record are Delivery's business."""

    def committable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
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

    async def seek_to_committed(  # type: ignore[override]  # Faust's signature says int; None: never committed
        self,
    ) -> Mapping[TP, Optional[int]]:
        return await self._position_sources()

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
        Under exactly-once, a group that lost the offsets its tables' changelogs
        show it committed stops the worker (:class:`OffsetsLost`) instead.
        """
        generation = self.app.consumer_generation_id
        assigned_sources = [tp for tp in self.assignment() if tp.topic not in self.app.tables.changelog_topics]
        sources = [tp for tp in assigned_sources if self.guarantee.owns(tp)]
        never_positioned = [tp for tp in sources if self.delivery.resume_point(tp) is None]
        try:
            committed = await self.guarantee.committed_offsets(sources)
            never_committed = [tp for tp in never_positioned if committed.get(tp) is None]
            if never_committed:
                await self.guarantee.refuse_lost_offsets(committed, assigned_sources)
            first_offsets = await self.earliest_offsets(*never_committed) if never_committed else {}
        except (KafkaException, AioKafkaError) as exc:
            # The broker is away for longer than the reads wait (a restart on a busy machine).
            # Unpositioned partitions hand nothing out; the next assignment positions them.
            log.warning("Could not read where to resume (%s); rejoining the group to try again", exc)
            self.request_rejoin()
            return {}
        except OffsetsLost as exc:
            await self.crash(exc)  # every worker given these partitions stops the same way, until an operator acts
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
            return self.app.consumer_generation_id == generation and self.guarantee.owns(tp)

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
        return bool(self.committable_offsets(self.assignment()))


def _offsets_text(offsets: Mapping[TP, Optional[int]]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]={offset}" for tp, offset in sorted(offsets.items()))
