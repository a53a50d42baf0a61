"""The consumer's answers to Faust's table recovery, where Faust's own would stall or crash it.

Faust's recovery asks its consumer where each changelog starts and ends, how far
it has read, and how many partitions a topic has. Under transactions, after a
broker restart, and just after a topic is created, Faust's own answers are
wrong; :class:`RecoveryReads` answers them, and the worker's consumer
(:class:`faust_eos.consuming.consumer.Consumer`) builds on it.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Mapping, Optional, Set, cast

from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaException
from faust.tables.recovery import RebalanceAgain
from faust.types import TP

from faust_eos.committing.guarantee import Guarantee
from faust_eos.faust_internals import ConsumerHooks

if TYPE_CHECKING:
    from faust.tables.manager import TableManager

log = logging.getLogger(__name__)


#: the first and the longest wait between asks for the metadata of subscribed topics it lacks
METADATA_RETRY_S = (1.0, 10.0)


class RecoveryReads(ConsumerHooks):
    """Faust's consumer, answering its table recovery right under transactions and broker restarts."""

    _asking_for_missing_topics = False

    @property
    def guarantee(self) -> Guarantee:
        """Where the worker's records wait and how they commit: chosen by the consumer built on this."""
        raise NotImplementedError

    async def on_partitions_assigned(self, assigned: Set[TP], generation_id: int = 0) -> None:
        # A topic created a moment before the worker started (its input, or the changelog,
        # repartition and leader topics Faust creates at start) can be missing from the
        # consumer's first metadata. The group then assigns none of its partitions, and the
        # consumer would not ask again for minutes (its metadata age). Asked again until
        # the topics appear; the consumer then rebalances the group by itself.
        await super().on_partitions_assigned(assigned, generation_id)
        if not self._asking_for_missing_topics and self.topics_missing_from_metadata():
            self._asking_for_missing_topics = True
            self.add_future(self._ask_until_topics_known())

    async def _ask_until_topics_known(self) -> None:
        wait_s, longest_s = METADATA_RETRY_S
        try:
            missing = self.topics_missing_from_metadata()
            log.warning("The broker's metadata lacks %s, so the group assigned none of their partitions; "
                        "asking again until it has them", ", ".join(missing))
            while missing and not self.should_stop:
                self.refresh_metadata()
                await self.sleep(wait_s)
                wait_s = min(wait_s * 2, longest_s)
                missing = self.topics_missing_from_metadata()
            if not missing:
                log.info("The broker's metadata has every subscribed topic now")
        finally:
            self._asking_for_missing_topics = False

    async def highwaters(self, *partitions: TP) -> Mapping[TP, int]:
        # Faust's recovery asks where each changelog ends and takes a partition as
        # restored once it has applied the record just before that end. Faust reads
        # the end from the last fetch response, which may not exist yet for a partition
        # just assigned; and under transactions the offsets before the end hold commit
        # markers, not records. Under exactly-once asked of the broker: the offset past the last committed record.
        try:
            ends = await self.guarantee.changelog_ends(partitions)
        except KafkaException as exc:
            # The broker is away for longer than the reads wait: restore again after a rebalance.
            log.warning("Could not read where the changelogs end (%s); rejoining the group to restore again", exc)
            self.request_rejoin()
            raise RebalanceAgain() from exc
        return ends if ends is not None else await super().highwaters(*partitions)

    async def earliest_offsets(self, *partitions: TP) -> Mapping[TP, int]:
        # Faust's recovery seeks each changelog to the offset before its first record. Just
        # after a broker restart the broker can answer -1 for that first record (not known
        # yet); Faust would then seek to -2, and its recovery, and so the worker, crash.
        earliest = await super().earliest_offsets(*partitions)
        unknown = sorted(f"{tp.topic}[{tp.partition}]" for tp, offset in earliest.items()
                         if offset is not None and offset < 0)
        if unknown:
            log.warning("The broker does not know yet where %s start; rejoining the group to restore again",
                        ", ".join(unknown))
            self.request_rejoin()
            raise RebalanceAgain()
        return earliest

    async def position(self, tp: TP) -> Optional[int]:
        if self.in_transaction and tp.topic in self.app.tables.changelog_topics:
            # Faust's recovery asks this only to guess, after a quiet spell, that what is
            # left of a changelog is transaction markers, and then skips to its end. The
            # consumer's position runs ahead of records not yet applied (fetched, or
            # queued for the tables), which that guess skipped. highwaters() says where
            # the last record is, so no guess is needed: answer how far recovery applied.
            recovery = cast("TableManager", self.app.tables).recovery
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
