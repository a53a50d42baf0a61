"""What the exactly-once worker reads of what committed, and what it decides from it.

Its input partitions' stable committed offsets (where handing out resumes), whether
the group lost offsets its tables' changelogs show it committed, whether each
assigned table partition's local state can be trusted, and where a restore of a
changelog ends. The reads run on threads of their own
(:class:`~faust_eos.committing.offsets.CommittedOffsets` blocks), never on the event loop.
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Mapping, Optional, Set, TypeVar

from confluent_kafka import KafkaException
from faust.types import TP

from faust_eos.committing.guarantee import ConsumerCalls
from faust_eos.committing.offsets import CommittedOffsets, changelogs_to_check, lost_offsets
from faust_eos.security import librdkafka_client
from faust_eos.state.table_state import ChangelogBounds, TableState

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: how often a broker looks for transactions past their timeout to abort them (Kafka's default
#: ``transaction.abort.timed.out.transaction.cleanup.interval.ms``), with a margin
EXPIRED_TRANSACTIONS_CHECK_S = 15.0


class CommittedReads:
    """One worker's reads of committed offsets and changelog bounds, and the checks made with them."""

    def __init__(self, app: Any, tables: TableState, consumer: ConsumerCalls, transaction_timeout_s: float,
                 stopping: Callable[[], bool]) -> None:
        self.app = app
        self._tables = tables
        self._consumer = consumer
        self._transaction_timeout_s = transaction_timeout_s
        self._stopping = stopping
        self._reader: Optional[CommittedOffsets] = None
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="eos-offsets")

    def start(self) -> None:
        self._reader = CommittedOffsets(librdkafka_client(self.app.conf), self.app.conf.id)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.interrupt()  # a read still running gives up, so the close soon follows
            self._threads.submit(self._reader.close)
        self._threads.shutdown(wait=False)

    async def topic_exists(self, topic: str) -> bool:
        return await self._in_thread(self._started().topic_exists, topic)

    async def stable_committed_offsets(self, tps: Iterable[TP]) -> dict[TP, Optional[int]]:
        """The group's committed offsets, once no transaction still holds them pending."""
        tps = list(tps)
        if not tps:
            return {}
        return await self._in_thread(self._started().read, tps)

    async def refuse_lost_offsets(self, committed: Mapping[TP, Optional[int]], sources: Iterable[TP]) -> None:
        """Raise :class:`~faust_eos.errors.OffsetsLost` if the group lost the committed offsets of input
        partitions (``sources``: every one assigned) whose tables' changelogs hold committed records."""
        # every changelog is of a table written in its event's partition: the table state refused the others
        changelog_topics = self.app.tables.changelog_topics
        changelogs = changelogs_to_check(committed, sources, [
            tp for tp in self._consumer.assignment() if tp.topic in changelog_topics],
            standbys=self.app.assignor.assigned_standbys())
        if changelogs:
            bounds = await self._in_thread(self._started().restore_bounds, changelogs)
            error = lost_offsets(self.app.conf.id, committed, bounds)
            if error is not None:
                raise error

    async def restore_ends(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Per changelog partition, the offset just past its last committed record, once every transaction
        open there has ended.

        A transaction left open there by an owner that died inside it (or that is
        paused) hides the records committed after it, by the owners that followed,
        until it ends: within the transaction timeout, plus the broker's check for
        expired transactions. Raises :class:`KafkaException` if one stays open longer.
        """
        tps = list(tps)
        if not tps:
            return {}
        within_s = min(self._transaction_timeout_s + EXPIRED_TRANSACTIONS_CHECK_S,
                       self.app.conf.broker_request_timeout / 2)  # Faust's recovery waits that long at most
        reader = self._started()
        await self._in_thread(reader.wait_for_open_transactions, tps, within_s)
        return await self._in_thread(reader.restore_ends, tps)

    async def check_local_state(self, changelog_tps: Set[TP]) -> None:
        """Rebuild from its changelog every assigned table partition whose local state cannot be trusted."""
        if not changelog_tps:
            return
        try:
            bounds = await self._settled_bounds(changelog_tps)
        except KafkaException as exc:
            log.warning("Could not read the changelogs' bounds (%s); rejoining the group to check again", exc)
            self._consumer.request_rejoin()
            return
        counts = {topic: self._consumer.topic_partitions(topic) for topic in {tp.topic for tp in changelog_tps}}
        untrusted = self._tables.untrusted(changelog_tps, bounds, counts)
        recovery = self.app.tables.recovery
        for tp, why in untrusted.items():
            self._tables.rebuild(tp, why)
            recovery.revoke(tp)  # recovery remembers how far it restored a partition it keeps: start over
        # The changelog reader of a partition this worker keeps is still at its end, and
        # Faust's recovery takes "position at the end" for "restored": rewind it.
        kept = set(untrusted) & set(self._consumer.assignment())
        if kept:
            await self._consumer.seek_to_beginning(*kept)

    async def _settled_bounds(self, changelog_tps: Set[TP]) -> dict[TP, ChangelogBounds]:
        """The changelogs' bounds, read again while a local checkpoint is past a pending transaction.

        A checkpoint is written only once its transaction committed, but the broker
        answers a commit before writing its markers; after a broker restart, or for
        a partition whose claim failed, they may still be missing. Such a checkpoint
        is judged once the transaction settles, or after half the session timeout:
        this runs inside the group's rebalance, when the worker sends no heartbeats.
        """
        reader = self._started()
        bounds = await self._in_thread(reader.restore_bounds, list(changelog_tps))
        waiting = self._tables.ahead_of_pending_commits(changelog_tps, bounds)
        if not waiting:
            return bounds
        log.info("Waiting for pending transactions on %s to settle before checking their local state",
                 ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(waiting)))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(self._transaction_timeout_s, self.app.conf.broker_session_timeout / 2)
        while waiting and loop.time() < deadline and not self._stopping():
            await asyncio.sleep(0.2)
            try:
                bounds = await self._in_thread(reader.restore_bounds, list(changelog_tps))
            except (KafkaException, RuntimeError) as exc:  # RuntimeError: stopping, the threads are gone
                log.warning("Could not read the changelogs' bounds again (%s); judging with the last read", exc)
                break
            waiting = self._tables.ahead_of_pending_commits(waiting, bounds)
        if waiting:
            log.warning("Transactions on %s did not settle in time; judging their local state as it stands",
                        ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(waiting)))
        return bounds

    def _started(self) -> CommittedOffsets:
        assert self._reader is not None, "read before the transaction manager started"
        return self._reader

    async def _in_thread(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            call = asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)
        except RuntimeError:  # the threads are shut down: the worker stops
            if self._stopping():  # a rebalance still running ends here, instead of crashing the stopping app
                raise asyncio.CancelledError() from None
            raise
        return await call
