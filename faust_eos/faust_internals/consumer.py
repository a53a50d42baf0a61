"""The consumer's private parts: Faust's aiokafka consumer, its thread, its acknowledgements.

Each is named, with the reason, in :mod:`faust_eos.faust_internals`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, MutableMapping, Optional, cast

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from mode import Service
from mode.utils.futures import notify


class ConsumerHooks(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer with the private hooks faust-eos overrides under public names.

    Each hook defaults to Faust's own behaviour; a subclass overrides the public
    name and calls ``super()`` for Faust's.
    """

    async def _getmany(self, active_partitions: Optional[set[TP]], timeout: float) -> Mapping[TP, list[Any]]:
        return await self.fetch_batch(active_partitions, timeout)

    async def fetch_batch(self, active_partitions: Optional[set[TP]], timeout: float) -> Mapping[TP, list[Any]]:
        """One fetch from the broker: records per partition, before Faust hands them out."""
        return await super()._getmany(active_partitions, timeout)

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        await self.note_gap(tp, offset_from, offset_to)

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return ConsumerThreadHooks(self, loop=self.loop, beacon=self.beacon)

    def fetch_wait_ms(self) -> Optional[int]:
        """How long one fetch may wait at the broker for records; None keeps Faust's (1,500 ms)."""
        return None

    def fetch_min_bytes(self) -> Optional[int]:
        """How many bytes of records a fetch waits for at the broker (up to the fetch wait); None keeps
        aiokafka's (1)."""
        return None

    async def note_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        """Offsets ``offset_from`` to ``offset_to`` of ``tp`` hold no record for the streams."""
        await super()._add_gap(tp, offset_from, offset_to)

    def _filter_committable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self.committable_offsets(tps)

    def committable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Per partition of ``tps``, the offset the next commit may reach (only those that moved)."""
        return super()._filter_committable_offsets(tps)

    async def _seek(self, partition: TP, offset: int) -> None:
        await self.seek_partition(partition, offset)

    async def seek_partition(self, tp: TP, offset: int) -> None:
        """Move the fetch position of ``tp``; every seek Faust makes comes here."""
        await super()._seek(tp, offset)

    @Service.task
    async def _commit_handler(self) -> None:
        await self.run_commit_timer()

    async def run_commit_timer(self) -> None:
        """Run the timer commits while the consumer runs (Faust's: a commit, then a whole ``commit_interval``)."""
        await super()._commit_handler(self)

    async def _commit(self, offsets: Mapping[TP, int]) -> bool:
        return await self.commit_to_group(offsets)

    async def commit_to_group(self, offsets: Mapping[TP, int]) -> bool:
        """Commit ``offsets`` to the consumer group, outside any transaction; True if accepted."""
        return await super()._commit(offsets)

    # -- the aiokafka consumer and its thread ------------------------------------
    def aiokafka_consumer(self) -> Any:
        """The aiokafka consumer Faust drives; call into it only on its thread."""
        return self._thread._ensure_consumer()

    async def call_on_consumer_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the consumer's own thread, where its fetches run."""
        return await self._thread.call_thread(fn, *args)

    def request_rejoin(self) -> None:
        """Make the group rebalance soon."""
        coordinator = self.aiokafka_consumer()._coordinator
        self._thread.thread_loop.call_soon_threadsafe(coordinator.request_rejoin)

    def group_membership(self) -> tuple[int, str]:
        """This worker's generation and member id in the group (-1 and "" while it is not a member)."""
        coordinator = self.aiokafka_consumer()._coordinator
        return coordinator.generation, coordinator.member_id

    def refresh_metadata(self) -> None:
        """Ask the broker for fresh topic metadata soon."""
        client = self.aiokafka_consumer()._client
        self._thread.thread_loop.call_soon_threadsafe(client.force_metadata_update)

    def topics_missing_from_metadata(self) -> list[str]:
        """The group's subscribed topics that the consumer's last metadata gave no partitions."""
        snapshot = self.aiokafka_consumer()._coordinator._metadata_snapshot
        return sorted(topic for topic, partitions in snapshot.items() if not partitions)


class ConsumerThreadHooks(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread, building the worker's aiokafka consumer with the consumer's fetch wait and size."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # both read once, by the fetcher its start() builds
        hooks = cast(ConsumerHooks, self.consumer)  # the consumer whose _new_consumer_thread made this thread
        wait_ms, min_bytes = hooks.fetch_wait_ms(), hooks.fetch_min_bytes()
        if wait_ms is not None:
            consumer._fetch_max_wait_ms = wait_ms
        if min_bytes is not None:
            consumer._fetch_min_bytes = min_bytes
        return consumer



def committed_offsets(consumer: Any) -> MutableMapping[TP, Optional[int]]:
    """The offsets Faust recorded as committed, per partition (it records them after each commit round)."""
    offsets: MutableMapping[TP, Optional[int]] = consumer._committed_offset
    return offsets


def acknowledged(consumer: Any, message: Any) -> None:
    """What Faust's consumer must learn of a message acknowledged without its ack lists: it counts
    towards ``broker_commit_every``, and a worker waiting for its streams to finish waits no more for it."""
    consumer._n_acked += 1
    consumer._unacked_messages.discard(message)
    notify(consumer._waiting_for_ack)


def forget_acks_below(consumer: Any, tp: TP, offset: int) -> None:
    """Drop Faust's acknowledgements of ``tp`` below ``offset``: they decide nothing any more."""
    acked = consumer._acked[tp]
    acked[:] = [acked_offset for acked_offset in acked if acked_offset >= offset]
    consumer._acked_index[tp].intersection_update(acked)
