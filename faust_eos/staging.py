"""Records waiting for the transaction of the input partition they came from.

Under exactly-once, nothing an event causes (output records, table changelog
writes) reaches Kafka before the event is fully processed: it is staged here,
tagged with the event's topic-partition and offset. A commit of input
partition ``tp`` up to offset ``n`` then takes exactly the records caused by
offsets below ``n``, so the transaction that commits those offsets holds all
of their effects and nothing else.
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Callable, Deque, Iterable, NamedTuple, Optional, Sequence

from aiokafka.structs import RecordMetadata

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


@dataclass
class StagedRecord:
    """One record to produce inside its source partition's transaction."""

    topic: str
    key: Optional[bytes]
    value: Optional[bytes]
    partition: Optional[int]
    timestamp_ms: Optional[int]
    headers: Optional[Sequence[tuple[str, bytes]]]
    source_offset: int
    #: called on the event loop once the transaction holding the record commits;
    #: a record that is dropped instead never calls it (its event will be
    #: processed again, by this worker or the partition's next owner)
    on_committed: Callable[[RecordMetadata], None] = field(repr=False, default=lambda md: None)


class Staging:
    """Staged records per source partition, in the order they were sent."""

    def __init__(self) -> None:
        self._by_tp: defaultdict[SourceTP, Deque[StagedRecord]] = defaultdict(deque)
        self._unbound: set[SourceTP] = set()  # partitions holding UNBOUND records

    def add(self, source: Source, record: StagedRecord) -> None:
        tp = SourceTP(source.topic, source.partition)
        self._by_tp[tp].append(record)
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
        return taken

    def put_back(self, tp: SourceTP, records: Iterable[StagedRecord]) -> None:
        """Return records taken for a transaction that did not commit."""
        records = list(records)
        self._by_tp[tp].extendleft(reversed(records))
        if any(record.source_offset == UNBOUND for record in records):
            self._unbound.add(tp)

    def discard(self, tp: SourceTP) -> int:
        """Drop every record of ``tp``; return how many there were."""
        self._unbound.discard(tp)
        return len(self._by_tp.pop(tp, ()))

    def unbound(self) -> set[SourceTP]:
        """Source partitions holding records that wait for their partition's next transaction."""
        return set(self._unbound)

    def pending(self) -> set[SourceTP]:
        """Source partitions that have staged records."""
        return {tp for tp, queue in self._by_tp.items() if queue}

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._by_tp.values())
