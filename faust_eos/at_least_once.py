"""Tables under at-least-once: a write reaches its changelog only after its event's outputs.

Without transactions, a table write sent to the changelog at once can become
durable while the output records of the same event are still in the
producer's buffer; after a crash the event is processed again, and a dedup
table then drops it as a repeat: the output is lost. Here a changelog record
is held (and read by its table, :mod:`faust_eos.store`) until its event's
offset commits. Faust flushes the outputs first; then the held records, the
last per key, are sent and acknowledged; then they reach RocksDB with their
checkpoint; only then the offsets are committed to the group. A crash in
between replays events whose outputs may already exist: duplicates, never loss.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping, Optional

from faust.streams import current_event
from faust.types import TP
from faust.types.tuples import FutureMessage

from faust_eos.errors import OutputNotWritten
from faust_eos.staging import (
    UNBOUND,
    Source,
    SourceTP,
    StagedRecord,
    Staging,
    last_write_per_key,
    resolve,
    staged_from_future,
)
from faust_eos.table_state import TableState

log = logging.getLogger(__name__)


class HeldChangelogs:
    """Changelog records waiting for their input offsets to commit, outside transactions."""

    def __init__(self, tables: TableState, producer: Any) -> None:
        self.tables = tables
        self.staging = Staging()
        self._producer = producer
        self._output_failure: Optional[BaseException] = None

    def output_failed(self, exc: BaseException) -> None:
        """An output record's send failed (Faust's flush does not say so): no offset may commit any more."""
        if self._output_failure is None:
            log.error("An output record could not be written (%r): the worker stops at its next commit, "
                      "and its events since the last commit are processed again", exc)
            self._output_failure = exc

    def hold(self, fut: FutureMessage) -> None:
        """Stage a table's changelog record with the event that wrote it (outside events: its own partition)."""
        message = fut.message
        event = current_event()
        if event is not None:
            source = Source(event.message.topic, event.message.partition, event.message.offset)
        else:
            source = Source(message.channel.get_topic_name(), message.partition, UNBOUND)
        record = staged_from_future(fut, source.offset)
        self.staging.add(source, record)
        self.tables.hold(record)

    async def write_up_to(self, offsets: Mapping[TP, int]) -> None:
        """Send, acknowledge and store the records of events below ``offsets``, and any written outside events.

        Raises what the producer raises; the records are then held again, for the next commit.
        Raises :class:`OutputNotWritten` if an output record failed since start: committing would
        lose its event, so the worker stops instead and the events since the last commit replay.
        """
        if self._output_failure is not None:
            raise OutputNotWritten(f"an output record could not be written: {self._output_failure!r}")
        taken: list[tuple[SourceTP, list[StagedRecord]]] = []
        for tp, offset in offsets.items():
            source = SourceTP(tp.topic, tp.partition)
            taken.append((source, self.staging.take(source, offset)))
        for source in self.staging.unbound():
            taken.append((source, self.staging.take(source, 0)))
        records = [record for _, partition_records in taken for record in partition_records]
        if not records:
            return
        to_send, replaced = last_write_per_key(records, self.tables.changelog_topics)
        try:
            futures = [
                await self._producer.send(r.topic, r.key, r.value, r.partition,
                                          r.timestamp_ms / 1000 if r.timestamp_ms else None, r.headers)
                for r in to_send
            ]
            metadata = await asyncio.gather(*futures)
        except BaseException:
            for source, partition_records in taken:
                self.staging.put_back(source, partition_records)
            raise
        self.tables.committed(to_send, metadata)
        resolve(to_send, replaced, metadata)

    def drop(self, tps: Any) -> None:
        """Forget the held records of revoked input partitions: their events will be processed again."""
        for tp in tps:
            dropped = self.staging.discard(SourceTP(tp.topic, tp.partition))
            if dropped:
                self.tables.dropped(dropped)
                log.info("Dropped %d unwritten table writes of %s[%d]", len(dropped), tp.topic, tp.partition)
