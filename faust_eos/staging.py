"""Records waiting for the commit of the input partition they came from.

Nothing an event causes (output records, table changelog writes) reaches Kafka
before the event is fully processed: it is staged here, tagged with the
event's topic-partition and offset. A commit of input partition ``tp`` up to
offset ``n`` then takes exactly the records caused by offsets below ``n``: under
exactly-once the transaction that commits those offsets holds all of their
effects and nothing else; under at-least-once they are all acknowledged before
the offsets commit (:mod:`faust_eos.at_least_once`).
"""
from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Deque, Iterable, NamedTuple, Optional, Sequence

from aiokafka.structs import RecordMetadata
from faust.streams import current_event

from faust_eos.errors import wait_inside_event_refused

#: source offset of a record no input event caused (a table write outside an event,
#: such as a window's expiry): it commits in its partition's next transaction
UNBOUND = -1


class Source(NamedTuple):
    """Input topic-partition and offset of the event that caused a record."""

    topic: str
    partition: int
    offset: int


class SourceTP(NamedTuple):
    topic: str
    partition: int


def _nothing(metadata: RecordMetadata) -> None:
    """What a staged record no one waits for calls once committed."""


@dataclass(slots=True)
class StagedRecord:
    """One record to produce with its source partition's commit."""

    topic: str
    key: Optional[bytes]
    value: Optional[bytes]
    partition: Optional[int]
    timestamp_ms: Optional[int]
    headers: Optional[Sequence[tuple[str, bytes]]]
    source_offset: int
    #: called on the event loop once the commit holding the record went through;
    #: a record that is dropped instead never calls it (its event will be
    #: processed again, by this worker or the partition's next owner)
    on_committed: Callable[[RecordMetadata], None] = field(repr=False, default=_nothing)


class Staging:
    """Staged records per source partition, in the order they were sent."""

    def __init__(self) -> None:
        self._by_tp: defaultdict[SourceTP, Deque[StagedRecord]] = defaultdict(deque)
        self._unbound: set[SourceTP] = set()  # partitions holding UNBOUND records
        self._count = 0
        # the event the last record was staged for, and its input partition: a batch stages many
        self._event: Any = None
        self._event_tp = SourceTP("", -1)

    def add_in_event(self, event: Any, topic: str, key: Optional[bytes], value: Optional[bytes],
                     partition: Optional[int], timestamp: Optional[float], headers: Any,
                     on_committed: Optional[Callable[[RecordMetadata], None]]) -> StagedRecord:
        """Stage a record sent while an agent processes ``event`` (a Faust event), with its input offset."""
        message = event.message
        if event is not self._event:
            self._event, self._event_tp = event, SourceTP(message.topic, message.partition)
        record = staged_record(topic, key, value, partition, timestamp, headers, message.offset, on_committed)
        self._by_tp[self._event_tp].append(record)
        self._count += 1
        return record

    def event_source(self) -> SourceTP:
        """The input partition of the event the last record was staged for."""
        return self._event_tp

    def add(self, source: Source, record: StagedRecord) -> None:
        tp = SourceTP(source.topic, source.partition)
        self._by_tp[tp].append(record)
        self._count += 1
        if record.source_offset == UNBOUND:
            self._unbound.add(tp)

    def take(self, tp: SourceTP, up_to_offset: int) -> list[StagedRecord]:
        """Remove and return the records caused by offsets below ``up_to_offset``, and every UNBOUND one."""
        self._unbound.discard(tp)
        queue = self._by_tp.get(tp)
        taken: list[StagedRecord] = []
        # records of one partition arrive in offset order, except that a
        # later event's record can precede a slower, earlier one: scan all
        if queue:
            kept: Deque[StagedRecord] = deque()
            for record in queue:
                (taken if record.source_offset < up_to_offset else kept).append(record)
            self._by_tp[tp] = kept
        self._count -= len(taken)
        return taken

    def put_back(self, tp: SourceTP, records: Iterable[StagedRecord]) -> None:
        """Return records taken for a transaction that did not commit."""
        records = list(records)
        self._by_tp[tp].extendleft(reversed(records))
        self._count += len(records)
        if any(record.source_offset == UNBOUND for record in records):
            self._unbound.add(tp)

    def discard(self, tp: SourceTP) -> list[StagedRecord]:
        """Drop every record of ``tp``, and return them."""
        self._unbound.discard(tp)
        dropped = list(self._by_tp.pop(tp, ()))
        self._count -= len(dropped)
        return dropped

    def unbound(self) -> set[SourceTP]:
        """Source partitions holding records that wait for their partition's next transaction."""
        return set(self._unbound)

    def pending(self) -> set[SourceTP]:
        """Source partitions that have staged records."""
        return {tp for tp, queue in self._by_tp.items() if queue}

    def __len__(self) -> int:
        return self._count


def last_write_per_key(
    records: Sequence[StagedRecord], changelog_topics: Container[str]
) -> tuple[list[StagedRecord], list[tuple[StagedRecord, StagedRecord]]]:
    """The records to produce: every output record, and of each table key's changelog records the last.

    Also returns each changelog record left out, paired with the later write
    of its key that replaces it.
    """
    last: dict[tuple[str, Optional[int], Optional[bytes]], StagedRecord] = {}
    for record in records:
        if record.topic in changelog_topics:
            last[(record.topic, record.partition, record.key)] = record
    kept: list[StagedRecord] = []
    replaced: list[tuple[StagedRecord, StagedRecord]] = []
    for record in records:
        if record.topic not in changelog_topics:
            kept.append(record)
            continue
        survivor = last[(record.topic, record.partition, record.key)]
        if survivor is record:
            kept.append(record)
        else:
            replaced.append((record, survivor))
    return kept, replaced


def resolve(sent: Sequence[StagedRecord], replaced: Sequence[tuple[StagedRecord, StagedRecord]],
            metadata: Sequence[RecordMetadata]) -> None:
    """Tell each record it is durable: ``sent`` with its own metadata, a replaced one with its survivor's."""
    by_record = dict(zip(map(id, sent), metadata))
    for record, md in zip(sent, metadata):
        record.on_committed(md)
    for record, survivor in replaced:
        record.on_committed(by_record[id(survivor)])


def staged_record(topic: str, key: Optional[bytes], value: Optional[bytes], partition: Optional[int],
                  timestamp: Optional[float], headers: Any, source_offset: int,
                  on_committed: Optional[Callable[[RecordMetadata], None]] = None) -> StagedRecord:
    """A record as Faust hands it to a producer (timestamp in seconds, headers a mapping or pairs), staged."""
    if not headers:
        headers = None
    elif isinstance(headers, Mapping):
        headers = list(headers.items())
    return StagedRecord(topic, key, value, partition, int(timestamp * 1000) if timestamp else None, headers,
                        source_offset, on_committed or _nothing)


def future_resolver(fut: Any) -> Callable[[RecordMetadata], None]:
    """What resolves a Faust ``FutureMessage`` (``Topic.send_soon``) once its record is durable."""

    def committed(metadata: RecordMetadata) -> None:
        fut.set_result(metadata)
        if fut.message.callback:
            fut.message.callback(fut)

    return committed


class CommitFuture(asyncio.Future):
    """Resolves with a staged record's metadata once the commit of its event makes it durable.

    Awaited while the agent still processes the event that sent the record, it
    would wait for ever (the commit waits for that event to finish): that raises
    :class:`~faust_eos.errors.SendNotCommittable` instead.
    """

    def __init__(self, *, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._sent_in = current_event()

    def __await__(self) -> Any:
        if not self.done() and self._sent_in is not None and current_event() is self._sent_in:
            raise wait_inside_event_refused()
        return super().__await__()

    __iter__ = __await__
