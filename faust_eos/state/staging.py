"""Output records waiting for the commit of the input partition they came from.

Nothing an event causes reaches Kafka before the event is fully processed: its
output records are staged here, tagged with the event's topic-partition and
offset, and its table writes are kept by their tables
(:mod:`faust_eos.state.table_writes`), tagged the same way. A commit of input
partition ``tp`` up to offset ``n`` then takes exactly the records caused by
offsets below ``n``: under exactly-once the transaction that commits those
offsets holds all of their effects and nothing else; under at-least-once they
are all acknowledged before the offsets commit (:mod:`faust_eos.committing.at_least_once`).
"""
from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Iterable, NamedTuple, Optional, Sequence

from aiokafka.structs import RecordMetadata
from faust.streams import current_event

from faust_eos.errors import wait_inside_event_refused
from faust_eos.faust_internals import reads_no_offset

#: source offset of a record no input event caused (a table write outside an event,
#: such as a window's expiry): it commits in its partition's next transaction
UNBOUND = -1


class SourceTP(NamedTuple):
    topic: str
    partition: int


def nothing(metadata: RecordMetadata) -> None:
    """What a staged record no one waits for calls once committed."""


@dataclass(slots=True, eq=False)  # equal only to itself, and hashable: as a future is
class StagedRecord:
    """One record to produce with its source partition's commit.

    It is also what a send inside an event returns (:func:`output_stager`): an
    awaitable of the record's metadata once its commit makes it durable, with
    ``add_done_callback``, ``remove_done_callback``, ``done`` and ``result`` as a
    future has (``asyncio.gather`` and ``asyncio.wait`` take it). Its future
    (:class:`CommitFuture`) is made only when first awaited or given a callback,
    as most sends are never waited for.
    """

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
    on_committed: Callable[[RecordMetadata], None] = field(repr=False, default=nothing)
    #: whether anyone reads the record's offset (``on_committed``, or its future once awaited or given a
    #: callback): if not, the producer is not asked to report its delivery (each report costs the producer's
    #: thread a turn of the GIL)
    metadata_wanted: bool = field(repr=False, default=True)
    #: of an output record sent inside an event: its future, once awaited or given a callback
    future: Optional["CommitFuture"] = field(repr=False, default=None)
    #: of a table's changelog record: the table write it commits (:class:`faust_eos.state.table_writes.Write`)
    write: Any = field(repr=False, default=None)
    #: of an output record sent inside an event: that event (its future may not be awaited while it runs)
    sent_in: Any = field(repr=False, default=None)
    #: of an output record sent inside an event: its metadata, once committed
    metadata: Optional[RecordMetadata] = field(repr=False, default=None)

    def needs_metadata(self) -> bool:
        """Whether someone will read this record's offset once it commits."""
        return self.metadata_wanted

    def __await__(self) -> Any:
        return self.as_future().__await__()

    def add_done_callback(self, fn: Callable[[asyncio.Future[Any]], None], *, context: Any = None) -> None:
        """Call ``fn`` with the record's future once the record is committed.

        Faust's own callback for a send it published without a callback of its own
        does not ask for the record's offset (:func:`faust_eos.faust_internals.reads_no_offset`).
        """
        if not reads_no_offset(fn):
            self.metadata_wanted = True
        self._made_future().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: Callable[[asyncio.Future[Any]], None]) -> int:
        """Remove ``fn`` from the callbacks (as ``asyncio.wait`` does); how many were removed."""
        return 0 if self.future is None else self.future.remove_done_callback(fn)

    def done(self) -> bool:
        """Whether the record is committed."""
        return self.metadata is not None

    def result(self) -> RecordMetadata:
        """The committed record's metadata; ``asyncio.InvalidStateError`` before its commit."""
        if self.metadata is None:
            raise asyncio.InvalidStateError(f"a record for {self.topic!r} not committed yet")
        return self.metadata

    def as_future(self) -> "CommitFuture":
        """The future of the record's commit, made on first use: the offset is asked of the producer only
        for records whose future someone holds by the time they are produced."""
        self.metadata_wanted = True
        return self._made_future()

    def _made_future(self) -> "CommitFuture":
        future = self.future
        if future is None:
            future = self.future = CommitFuture(loop=asyncio.get_running_loop())
            future.sent_in = self.sent_in
            if self.metadata is not None:
                future.set_result(self.metadata)
        return future


class Staging:
    """Staged records per source partition, in the order they were sent."""

    def __init__(self) -> None:
        self._by_tp: defaultdict[SourceTP, Deque[StagedRecord]] = defaultdict(deque)
        self._count = 0
        # the event the last record was staged for, and its input partition: a batch stages many
        self._event: Any = None
        self._event_tp = SourceTP("", -1)

    def add_in_event(self, event: Any, topic: str, key: Optional[bytes], value: Optional[bytes],
                     partition: Optional[int], timestamp: Optional[float], headers: Any,
                     on_committed: Optional[Callable[[RecordMetadata], None]],
                     metadata_wanted: bool = True) -> StagedRecord:
        """Stage a record sent while an agent processes ``event`` (a Faust event), with its input offset."""
        message = event.message
        if event is not self._event:
            self._event, self._event_tp = event, SourceTP(message.topic, message.partition)
        record = staged_record(topic, key, value, partition, timestamp, headers, message.offset, on_committed,
                               metadata_wanted)
        self._by_tp[self._event_tp].append(record)
        self._count += 1
        return record

    def add_at(self, source: SourceTP, record: StagedRecord) -> None:
        """Stage ``record``, caused by an event of input partition ``source``."""
        self._by_tp[source].append(record)
        self._count += 1

    def take(self, tp: SourceTP, up_to_offset: int) -> list[StagedRecord]:
        """Remove and return the records caused by offsets below ``up_to_offset``."""
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

    def discard(self, tp: SourceTP) -> list[StagedRecord]:
        """Drop every record of ``tp``, and return them."""
        dropped = list(self._by_tp.pop(tp, ()))
        self._count -= len(dropped)
        return dropped

    def pending(self) -> set[SourceTP]:
        """Source partitions that have staged records."""
        return {tp for tp, queue in self._by_tp.items() if queue}

    def __len__(self) -> int:
        return self._count


def resolve(sent: Sequence[StagedRecord], metadata: Sequence[RecordMetadata]) -> None:
    """Tell each record it is durable, with its own metadata."""
    for record, md in zip(sent, metadata):
        record.on_committed(md)
        record.metadata = md
        if record.future is not None:
            record.future.set_result(md)


#: stages an output record sent inside an event (:func:`output_stager`): ``(path, key, value, partition,
#: timestamp, headers, on_committed, metadata_wanted)``, returning the staged record (an awaitable of its metadata)
OutputStager = Callable[..., StagedRecord]


def output_stager(staging: Staging, topic: str) -> OutputStager:
    """What stages the output records that events send to ``topic``: each with the input partition and offset
    of its event's ``path`` (an :class:`~faust_eos.short_paths.event_path.EventPath`); the record it returns
    resolves once it commits. Built once per topic, as it runs for every record an agent sends."""
    add = staging.add_at

    def stage(path: Any, key: Optional[bytes], value: Optional[bytes], partition: Optional[int],
              timestamp: Optional[float], headers: Any = None, on_committed: Callable[[RecordMetadata], None] = nothing,
              metadata_wanted: bool = False) -> StagedRecord:
        if headers:
            headers = list(headers.items()) if isinstance(headers, Mapping) else headers
        record = StagedRecord(topic, key, value, partition, int(timestamp * 1000) if timestamp else None,
                              headers or None, path.offset, on_committed, metadata_wanted, None, None, path.event)
        add(path.source, record)
        return record

    return stage


def staged_record(topic: str, key: Optional[bytes], value: Optional[bytes], partition: Optional[int],
                  timestamp: Optional[float], headers: Any, source_offset: int,
                  on_committed: Optional[Callable[[RecordMetadata], None]] = None,
                  metadata_wanted: bool = True) -> StagedRecord:
    """A record as Faust hands it to a producer (timestamp in seconds, headers a mapping or pairs), staged."""
    if not headers:
        headers = None
    elif isinstance(headers, Mapping):
        headers = list(headers.items())
    return StagedRecord(topic, key, value, partition, int(timestamp * 1000) if timestamp else None, headers,
                        source_offset, on_committed or nothing, metadata_wanted)


def future_resolver(fut: Any) -> Callable[[RecordMetadata], None]:
    """What resolves a Faust ``FutureMessage`` (``Topic.send_soon``) once its record is durable."""

    def committed(metadata: RecordMetadata) -> None:
        fut.set_result(metadata)
        if fut.message.callback:
            fut.message.callback(fut)

    return committed


class CommitFuture(asyncio.Future[Any]):
    """Resolves with a staged record's metadata once the commit of its event makes it durable (see
    :meth:`StagedRecord.as_future`; a send by Faust's own topic returns one directly).

    Awaited while the agent still processes the event that sent the record
    (:attr:`sent_in`), it would wait for ever (the commit waits for that event
    to finish): that raises :class:`~faust_eos.errors.SendNotCommittable` instead.

    A record whose future did not exist when it was produced resolves with its
    topic, its partition (-1 where the producer's partitioner chose it) and an
    offset of -1 (:data:`OFFSET_NOT_ASKED`). Built as an ``asyncio.Future`` is (``loop=``).
    """

    #: the event whose processing sent the record (None: sent outside events)
    sent_in: Any = None

    def __await__(self) -> Any:
        if not self.done() and self.sent_in is not None and current_event() is self.sent_in:
            raise wait_inside_event_refused()
        return super().__await__()

    __iter__ = __await__


#: the offset a committed record's metadata carries when nobody asked for it in time
OFFSET_NOT_ASKED = -1
