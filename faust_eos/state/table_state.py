"""The app's tables under faust-eos: their writes kept until commit, and their local state checked.

Each table is on the ``eos-rocksdb://`` store (:mod:`faust_eos.state.store`). A write
is kept by the table's store (:mod:`faust_eos.state.table_writes`), tagged with the
input partition and offset of the event that made it, so reads see it at once.
A commit of an input partition takes, per key of each table partition that
input partition writes, the newest write below the commit's offset, as one
changelog record in the same transaction as the outputs and the offsets; after
the commit the records reach RocksDB with the changelog offset they bring the
table partition to (its checkpoint), so Faust's recovery restores only what
lies past it. At each rebalance, the local state of every assigned table
partition is checked against its changelog, and rebuilt when it cannot be trusted.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence, cast

from faust.types import TP

from faust_eos.errors import StoreRefused
from faust_eos.state.staging import UNBOUND, SourceTP, StagedRecord
from faust_eos.state.store import Store
from faust_eos.state.table_writes import DELETED

log = logging.getLogger(__name__)


class ChangelogBounds(NamedTuple):
    """Where a changelog partition's committed records lie, as a ``read_committed`` reader sees them."""

    #: its log start offset
    start: int
    #: the offset just past its last committed record
    end: int
    #: records lie past the last stable offset: a transaction is open there, or committed with its
    #: markers not yet written (the broker answers a commit before it writes them)
    pending: bool


class TableState:
    """The ``eos-rocksdb://`` stores of an app's tables, by changelog topic, and where their writes commit.

    Any other store is refused, unless ``other_stores_allowed`` (at-least-once:
    tables on other stores then behave as Faust's own). Under exactly-once
    (``one_source``) a table partition may be written from one input partition
    only: its checkpoint covers the writes of one input partition's transactions.
    """

    def __init__(self, tables: Iterable[Any] = (), *, other_stores_allowed: bool = False,
                 one_source: bool = False) -> None:
        self.stores: dict[str, Store] = {}
        self.changelog_topics: frozenset[str] = frozenset()
        self._one_source = one_source
        #: changelog partition -> the input partitions whose events write it
        self._sources: dict[tuple[str, int], set[SourceTP]] = {}
        #: input partitions with table writes made outside events, which commit at its next commit
        self._unbound: set[SourceTP] = set()
        #: the writes kept by all the stores, each version counted
        self._held = 0
        self.add(tables, other_stores_allowed=other_stores_allowed)

    def add(self, tables: Iterable[Any], *, other_stores_allowed: bool = False) -> None:
        """Take the tables' stores (every table is declared before a worker starts)."""
        for table in tables:
            if not isinstance(table.data, Store):
                if other_stores_allowed:
                    continue
                raise StoreRefused(
                    f"table {table.name!r} is on a store that writes before its transaction commits, so after a "
                    "crash, an abort or a fence it would hold state that never committed: under exactly_once give "
                    "the app store='eos-rocksdb://' (Faust ignores a table's own store URL when nothing follows "
                    "its scheme)"
                )
            if table.use_partitioner or table.is_global:
                raise StoreRefused(
                    f"table {table.name!r} writes keys to partitions other than its event's (use_partitioner or "
                    "global): under exactly_once a table partition commits with the one input partition that "
                    "writes it"
                )
            self.stores[table.changelog_topic.get_topic_name()] = table.data
        self.changelog_topics = frozenset(self.stores)

    # -- writes ------------------------------------------------------------------
    def write(self, store: Store, partition: int, raw_key: bytes, value: Any, raw: Optional[bytes],
              source: SourceTP, offset: int) -> None:
        """A table write (``value`` as written, ``raw`` its encoding, None for a delete) by the event at
        ``offset`` of input partition ``source``."""
        sources = self._sources.get((store.changelog_name, partition))
        if sources is None or source not in sources:
            self._note_source((store.changelog_name, partition), source)
        self._held += store.writes.write(partition, raw_key, DELETED if raw is None else value, raw, source, offset)

    def hold(self, record: StagedRecord, source: SourceTP) -> None:
        """A changelog record from Faust's own table path, committing with input partition ``source``."""
        self._note_source((record.topic, cast(int, record.partition)), source)  # a changelog record's: set
        if record.source_offset == UNBOUND:
            self._unbound.add(source)
        self._held += self.stores[record.topic].hold(record, source)

    def _note_source(self, changelog: tuple[str, int], source: SourceTP) -> None:
        sources = self._sources.setdefault(changelog, set())
        if self._one_source and sources and source not in sources:
            known = next(iter(sources))
            topic, partition = changelog
            raise StoreRefused(
                f"table partition {topic}[{partition}] is written by events of {known.topic}[{known.partition}] "
                f"and of {source.topic}[{source.partition}]: under exactly_once each table is written from one "
                "input topic, co-partitioned with it"
            )
        sources.add(source)

    def source_of(self, changelog: tuple[str, int]) -> Optional[SourceTP]:
        """The input partition whose events write a changelog partition (under exactly-once, its only one)."""
        sources = self._sources.get(changelog)
        return next(iter(sources)) if sources else None

    def held(self) -> int:
        """How many table writes wait for their commit."""
        return self._held

    def unbound_sources(self) -> set[SourceTP]:
        """Input partitions whose next commit carries table writes made outside events."""
        return set(self._unbound)

    # -- commits -----------------------------------------------------------------
    def changelog_records(self, up_to: Mapping[SourceTP, int]) -> list[StagedRecord]:
        """Per table key, the changelog record of its newest write made by an event below ``up_to`` (per
        input partition; outside events, any)."""
        records = []
        for (topic, partition), sources in self._sources.items():
            if sources.isdisjoint(up_to):
                continue
            for raw_key, write in self.stores[topic].writes.committable(partition, up_to):
                # the offset is read of each changelog partition's last record only (the checkpoint). Faust's
                # own table path waits on its writes (write.callbacks), but only to hand their offsets to the
                # store, which keeps its checkpoints itself (Store.set_persisted_offset)
                records.append(StagedRecord(topic, raw_key, write.raw, partition, None, None, write.offset,
                                            metadata_wanted=False, write=write))
        self._unbound.difference_update(up_to)
        return records

    def committed(self, records: Sequence[StagedRecord], metadata: Sequence[Any]) -> None:
        """Changelog records committed: write each table partition's, with the offset of its last as checkpoint."""
        writes: defaultdict[tuple[str, int], list[tuple[StagedRecord, Any]]] = defaultdict(list)
        checkpoints: dict[tuple[str, int], int] = {}
        for record, md in zip(records, metadata):
            changelog = (record.topic, cast(int, record.partition))  # a changelog record's: set
            writes[changelog].append((record, md))
            checkpoints[changelog] = max(md.offset, checkpoints.get(changelog, -1))
        for (topic, partition), partition_writes in writes.items():
            self._held -= self.stores[topic].commit(partition, partition_writes, checkpoints[(topic, partition)])

    def not_committed(self, records: Sequence[StagedRecord]) -> None:
        """Changelog records whose commit failed: their writes commit with the next one."""
        self._unbound.update(record.write.source for record in records if record.source_offset == UNBOUND)

    def drop(self, source: SourceTP) -> int:
        """Forget the writes of events of ``source`` that did not commit (they will be processed again); how many."""
        dropped = 0
        for changelog, sources in list(self._sources.items()):
            if source in sources:
                dropped += self.stores[changelog[0]].writes.drop(changelog[1], [source])
                sources.discard(source)
                if not sources:
                    del self._sources[changelog]
        self._unbound.discard(source)
        self._held -= dropped
        return dropped

    def untrusted(
        self, tps: Iterable[TP], bounds: Mapping[TP, ChangelogBounds], partition_counts: Mapping[str, Optional[int]],
    ) -> dict[TP, str]:
        """The changelog partitions among ``tps`` whose local state cannot be trusted, with why."""
        found = {}
        for tp in tps:
            store = self.stores[tp.topic]
            store.changelog_partitions = partition_counts.get(tp.topic)
            why = store.untrusted(tp.partition, changelog_start=bounds[tp].start, changelog_end=bounds[tp].end)
            if why is not None:
                found[tp] = why
        return found

    def ahead_of_pending_commits(self, tps: Iterable[TP], bounds: Mapping[TP, ChangelogBounds]) -> set[TP]:
        """The changelog partitions among ``tps`` whose checkpoint lies past their last committed record
        while a transaction is pending there: the commit that wrote it may still be getting its markers."""
        ahead = set()
        for tp in tps:
            checkpoint = self.stores[tp.topic].checkpoint(tp.partition)
            if bounds[tp].pending and checkpoint is not None and checkpoint >= bounds[tp].end:
                ahead.add(tp)
        return ahead

    def rebuild(self, tp: TP, why: str) -> None:
        self._held -= self.stores[tp.topic].rebuild(tp.partition, why)
