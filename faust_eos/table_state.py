"""The app's tables under faust-eos: their writes held until commit, and their local state checked.

Each table is on the ``eos-rocksdb://`` store (:mod:`faust_eos.store`). Its
changelog records are staged with the transaction of the input partition
whose event wrote them, and held by the store so that reads see them; after
the commit they reach RocksDB with the changelog offset they bring the table
partition to (its checkpoint), so Faust's recovery restores only what lies
past it. At each rebalance, the local state of every assigned table partition
is checked against its changelog, and rebuilt when it cannot be trusted.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Iterable, Mapping, Optional, Sequence

from faust.types import TP

from faust_eos.errors import StoreRefused
from faust_eos.offsets import ChangelogBounds
from faust_eos.staging import StagedRecord
from faust_eos.store import Store

log = logging.getLogger(__name__)


class TableState:
    """The ``eos-rocksdb://`` stores of an app's tables, by changelog topic.

    Any other store is refused, unless ``other_stores_allowed`` (at-least-once:
    tables on other stores then behave as Faust's own).
    """

    def __init__(self, tables: Iterable[Any] = (), *, other_stores_allowed: bool = False) -> None:
        self.stores: dict[str, Store] = {}
        self.changelog_topics: frozenset[str] = frozenset()
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

    def hold(self, record: StagedRecord) -> None:
        """A changelog record was staged: its table reads it from now on."""
        self.stores[record.topic].hold(record)

    def held(self) -> int:
        return sum(store.held() for store in self.stores.values())

    def committed(self, records: Sequence[StagedRecord], metadata: Sequence[Any]) -> None:
        """Records committed: write each table partition's, with the offset of its last as checkpoint."""
        writes: defaultdict[tuple[str, int], list[StagedRecord]] = defaultdict(list)
        checkpoints: dict[tuple[str, int], int] = {}
        for record, md in zip(records, metadata):
            if record.topic in self.stores:
                changelog = (record.topic, record.partition)
                writes[changelog].append(record)
                checkpoints[changelog] = max(md.offset, checkpoints.get(changelog, -1))
        for (topic, partition), partition_writes in writes.items():
            self.stores[topic].commit(partition, partition_writes, checkpoints[(topic, partition)])

    def dropped(self, records: Sequence[StagedRecord]) -> None:
        """Records that will never commit: their tables forget them."""
        for record in records:
            store = self.stores.get(record.topic)
            if store is not None:
                store.release([record])

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
        self.stores[tp.topic].rebuild(tp.partition, why)
