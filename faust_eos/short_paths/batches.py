"""Batches: an agent handed every record one fetch brought of a partition, as one event.

Faust hands each record to its agents as an event of its own, which costs tens
of microseconds per record before an agent does any work. A topic whose
schema is :class:`Batches` is handed out one event per fetched batch of each
partition instead; the event's value is a :class:`Batch`, and the agent
iterates its records::

    payments = app.topic("payments", schema=faust_eos.Batches(key_type=str, value_type=Payment))

    @app.agent(payments)
    async def count(batches):
        async for batch in batches:
            for record in batch:
                counts[record.key] += record.value.amount_cents

A batch is one event for everything that follows events: what its records
send and write to tables commits with its offsets, it commits once the agent
asks for the next event, and a batch a worker's crash or a rebalance cut
short is processed again, whole, by the partition's next owner. An exception
the agent raises ends the batch as it ends an event in Faust: the batch is
acknowledged, so its records after the failing one are not processed. Each record keeps its
own offset, timestamp, headers and bytes (:class:`BatchRecord`), for dead
letters. The ``eos://`` transport builds the batches (:mod:`faust_eos.consuming.consumer`).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Sequence, cast

import faust
from aiokafka.structs import ConsumerRecord
from faust.exceptions import DecodeError

from faust_eos.codec import codecs_of
from faust_eos.errors import SettingRefused

log = logging.getLogger(__name__)

#: records per batch, at most: larger batches cost less per record, smaller ones commit sooner. Each batch
#: pays Faust's dispatch of an event and an agent's per-batch work (its table keys read and written once):
#: the pipeline used about 12% less CPU per event at 1,000 than at 100, and about the same at 2,000
DEFAULT_MAX_RECORDS = 1000


class BatchRecord(NamedTuple):
    """One record of a batch: key and value decoded by the topic's schema, and where it came from.

    A named tuple, not a frozen dataclass: one is built per record, and a frozen
    dataclass takes several times as long to build.
    """

    key: Any
    value: Any
    topic: str
    partition: int
    offset: int
    timestamp: Optional[float]  # seconds, as Faust's messages carry it
    headers: Sequence[tuple[str, bytes]]
    raw_key: Optional[bytes]
    raw_value: Optional[bytes]


class Batch:
    """The records one fetch brought of one partition, in offset order."""

    def __init__(self, records: Sequence[ConsumerRecord], loads_key: Optional[Callable[[Optional[bytes]], Any]] = None,
                 loads_value: Optional[Callable[[Optional[bytes]], Any]] = None) -> None:
        self.records = records
        self.topic: str = records[0].topic
        self.partition: int = records[0].partition
        self.first_offset: int = records[0].offset
        self.last_offset: int = records[-1].offset
        self._loads_key = loads_key or _unchanged
        self._loads_value = loads_value or _unchanged
        #: per channel that unpacked the batch into its records, which of them it is not done with yet
        #: (:class:`faust_eos.short_paths.unpacking.BatchProgress`)
        self.unpacked: list[Any] = []

    def decode_with(self, loads_key: Callable[[Optional[bytes]], Any],
                    loads_value: Callable[[Optional[bytes]], Any]) -> "Batch":
        """The same records, decoded with these (a topic's schema): a view of its own, as agents
        of one topic with other types each decode the batch their way."""
        return Batch(self.records, loads_key, loads_value)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[BatchRecord]:
        """Every record, decoded; one that cannot be decoded is logged and skipped, as Faust skips it."""
        loads_key, loads_value = self._loads_key, self._loads_value
        for record in self.records:
            try:
                key, value = loads_key(record.key), loads_value(record.value)
            except DecodeError as exc:
                log_undecodable(record, exc)
                continue
            yield BatchRecord(key, value, record.topic, record.partition, record.offset,
                              record.timestamp / 1000 if record.timestamp is not None else None,
                              record.headers, record.key, record.value)

    def __repr__(self) -> str:
        return f"<Batch {self.topic}[{self.partition}] {self.first_offset}..{self.last_offset} ({len(self)} records)>"


def log_undecodable(record: Any, exc: DecodeError) -> None:
    """Log a record of a batch that cannot be decoded: it is skipped, as Faust skips such an event."""
    log.error("Skipping %s[%d]@%d, which cannot be decoded: %s", record.topic, record.partition, record.offset, exc)


def batch_records(records: Sequence[ConsumerRecord], max_records: int) -> list[ConsumerRecord]:
    """Records standing for ``records`` (one partition's, in offset order), up to ``max_records`` each.

    The value of each is the :class:`Batch` of the records it stands for; it
    carries the last one's offset and timestamp, so Faust's fetch loop reads past them.
    """
    return [_batch_record(records[start:start + max_records]) for start in range(0, len(records), max_records)]


def _batch_record(records: Sequence[ConsumerRecord]) -> ConsumerRecord:
    last = records[-1]
    return ConsumerRecord(
        topic=last.topic, partition=last.partition, offset=last.offset, timestamp=last.timestamp,
        timestamp_type=last.timestamp_type, key=None, value=Batch(records), checksum=None,
        serialized_key_size=sum(r.serialized_key_size for r in records),
        serialized_value_size=sum(r.serialized_value_size for r in records), headers=(),
    )


class Batches(faust.Schema[Any, Any]):
    """A topic's schema that hands its agents one :class:`Batch` per fetched batch of a partition.

    Takes the arguments of :class:`faust.Schema`, which decode each record of
    a batch and encode what is sent to the topic as they would without
    batches, and ``max_records``: a longer fetched batch is handed out in
    parts. Until an agent finishes a batch, a commit cannot include it, and
    a commit runs only when the agent waits.
    """

    def __init__(self, *, max_records: int = DEFAULT_MAX_RECORDS, **schema: Any) -> None:
        if not isinstance(max_records, int) or max_records < 1:
            raise SettingRefused(f"Batches(max_records={max_records!r}): expected a whole number of at least 1")
        super().__init__(**schema)
        self.max_records = max_records

    def loads_key(self, app: Any, message: Any, *, loads: Any = None, serializer: Any = None) -> None:
        return None  # a batch has no key of its own; each record has its key

    def loads_value(self, app: Any, message: Any, *, loads: Any = None, serializer: Any = None) -> Batch:
        batch = message.value
        if not isinstance(batch, Batch):
            raise SettingRefused(
                f"topic {message.topic!r} has the faust_eos.Batches schema, but its records reach the agents one "
                "by one: batches come only from the eos:// transport (broker='eos://...')"
            )
        codecs = codecs_of(app)
        loads_key = codecs.key_loader(self.key_type, self.key_serializer)
        loads_payload = codecs.value_loader(self.value_type, self.value_serializer)
        if not self.allow_empty:
            return batch.decode_with(loads_key, loads_payload)

        def loads_value(raw: Optional[bytes]) -> Any:
            # a tombstone, handed out as Faust hands it out
            return None if raw is None else loads_payload(raw)

        return batch.decode_with(loads_key, loads_value)


def batched_topics(channels: Iterable[Any]) -> dict[str, Optional[int]]:
    """Per topic name the app's channels subscribe to: its records per batch, None if not handed out in batches.

    A topic is handed out in batches when its channels all have the :class:`Batches`
    schema (up to the smallest ``max_records`` of theirs), or all unpack batches into
    events of their own records (a :class:`faust_eos.Topic` without that schema:
    :mod:`faust_eos.short_paths.unpacking`), up to :data:`DEFAULT_MAX_RECORDS`. Raises
    :class:`SettingRefused` for a topic subscribed both with :class:`Batches` and without.
    """
    limits: dict[str, list[Optional[int]]] = {}  # per topic: each channel's records per batch (None: one by one)
    with_schema: dict[str, bool] = {}  # per topic: whether its channels have the Batches schema
    for channel in channels:
        schema = getattr(channel, "schema", None)
        explicit = isinstance(schema, Batches)
        unpacks = getattr(channel, "unpacks_batches", None)
        max_records = (cast(Batches, schema).max_records if explicit else
                       DEFAULT_MAX_RECORDS if unpacks is not None and unpacks() else None)
        for name in getattr(channel, "topics", None) or ():
            if with_schema.setdefault(name, explicit) != explicit:
                raise SettingRefused(
                    f"topic {name!r} is subscribed both with the faust_eos.Batches schema and without it: a "
                    "fetched record is handed out either in a batch or alone, so give every agent of the topic "
                    "the same schema"
                )
            limits.setdefault(name, []).append(max_records)
    return {name: None if None in each else min(n for n in each if n is not None) for name, each in limits.items()}


def _unchanged(raw: Optional[bytes]) -> Any:
    return raw
