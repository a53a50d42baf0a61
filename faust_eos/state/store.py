"""``eos-rocksdb://``: a RocksDB table store that holds only committed state.

A table write under faust-eos lives in memory until the transaction that
carries its changelog record commits (:class:`faust_eos.state.table_writes.TableWrites`);
reads see it at once, and a plain value is read as written rather than decoded
again. After the commit the partition's writes (the last one per key) go to
RocksDB as one write batch, together with the checkpoint: the changelog offset
that the database now reflects. Writes whose transaction failed wait for the
next commit; those of a partition given up (fenced, revoked) are dropped. So
the database never holds an effect that did not commit, and a restore reads
only the changelog past the checkpoint.

A restore skips Faust's per-record dispatch: of each fetched changelog batch
only the last record goes through Faust's recovery, and the store applies the
others with it (:meth:`Store.precede`).

Faust expires the old windows of a windowed table (``expires=``) in the local
store only; this store also sends each expired key's tombstone, which commits
with the table partition's next transaction.

Every table of an exactly-once app uses it, given as the app's store (Faust
ignores a table's own ``store=`` URL when nothing follows its scheme)::

    app = faust.App(..., broker="eos://...", store="eos-rocksdb://")
"""
from __future__ import annotations

import itertools
import logging
import shutil
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Sequence, Set, cast

from faust.streams import current_event
from faust.types import TP
from rocksdict import WriteBatch

from faust_eos import faust_internals, metrics
from faust_eos.codec import codecs_of
from faust_eos.errors import StoreRefused
from faust_eos.state.staging import StagedRecord, nothing
from faust_eos.state.table_writes import DECODE, DELETED, TableWrites, Write

if TYPE_CHECKING:
    from faust.tables.manager import TableManager

log = logging.getLogger(__name__)

#: keys of the store's own bookkeeping, beside the table's keys in each partition database
CHECKPOINT_KEY = faust_internals.StoreHooks.offset_key  # Faust's recovery reads it too
PARTITIONS_KEY = b"__faust_eos\0partitions__"
#: written with every checkpoint of this store; a checkpoint without it was written by Faust's
#: own RocksDB store, or an older faust-eos, which wrote state before it committed
FORMAT_KEY = b"__faust_eos\0format__"
FORMAT = b"committed-only-1"
OWN_KEYS = frozenset({CHECKPOINT_KEY, PARTITIONS_KEY, FORMAT_KEY})


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: what :meth:`Store.value_of` returns for a key the table partition does not hold
MISSING: Any = _Missing()


class Store(faust_internals.StoreHooks):
    """RocksDB for committed state, and per table partition the writes waiting for their commit."""

    def __post_init__(self) -> None:
        super().__post_init__()
        #: the changelog's partition count, written with each checkpoint
        self.changelog_partitions: Optional[int] = None
        #: table partition -> offset of a changelog record -> the records fetched before it (see precede())
        self._preceding: dict[int, dict[int, Sequence[Any]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._codecs = codecs_of(self.app)
        #: the writes of this table that have not committed yet
        self.writes = TableWrites(lambda raw: self.decoded(raw))
        if self.restores_in_batches():
            # Each record Faust's recovery buffers stands for a whole fetch: apply them soon.
            # Not one for actives: Faust then keeps reading an active partition's changelog
            # after its restore, and would apply this worker's own writes again, late.
            self.table.recovery_buffer_size = 2
            self.table.standby_buffer_size = 1
        # Each partition's restore series exists at 0 before its first restore, which rate() would not see
        kinds = ("active", "standby") if self.app.conf.table_standby_replicas else ("active",)
        for partition in range(self.table.partitions or self.app.conf.topic_partitions):
            for kind in kinds:
                metrics.changelog_records_restored.labels(self.table.name, str(partition), kind)

    # -- writes ------------------------------------------------------------------
    @property
    def changelog_name(self) -> str:
        """The name of this table's changelog topic."""
        name = self.__dict__.get("_changelog_name")
        if name is None:
            name = self.__dict__["_changelog_name"] = self.table.changelog_topic.get_topic_name()
        return name

    def hold(self, record: StagedRecord, source: Any) -> int:
        """Keep ``record``, a changelog record of this table staged by Faust's own table path, as the key's
        value until it commits (``source``: the input partition it commits with); how many more writes are kept."""
        value = DELETED if record.value is None else DECODE
        callback = record.on_committed if record.on_committed is not nothing else None
        # a changelog record of the table's: its partition and key are set
        return self.writes.write(cast(int, record.partition), cast(bytes, record.key), value, record.value, source,
                                 record.source_offset, callback)

    def held(self) -> int:
        """How many writes wait for their commit."""
        return self.writes.count

    def write_key(self, key: bytes, value: Optional[bytes]) -> None:
        # The table sent the key's changelog record just before; faust-eos's producer handed it to hold().
        if self._latest_write(key) is None:
            raise self._not_held()

    def delete_key(self, key: bytes) -> None:
        if self._latest_write(key) is None and self._partitions_holding(key):
            raise self._not_held()

    def _not_held(self) -> StoreRefused:
        return StoreRefused(
            f"table {self.table.name!r} was written without its changelog record reaching faust-eos: "
            "the eos-rocksdb:// store needs the app's broker to be eos://"
        )

    def __delitem__(self, key: Any) -> None:
        # Inside an event the table has already sent the key's tombstone; the
        # store is asked to delete outside one only by Faust's window expiry.
        if current_event() is None:
            for partition in self._partitions_holding(self.raw_key(key)):
                self.table.send_changelog(partition, key, None, value_serializer="raw")
        super().__delitem__(key)

    def _partitions_holding(self, raw: bytes) -> list[int]:
        """The partitions this worker serves actively that hold ``raw`` (standbys are written by others)."""
        active = self.active_partition_dbs()
        partitions = {partition for partition in active if self.writes.latest(partition, raw) is not None}
        partitions.update(partition for partition, db in active.items() if db.get(raw) is not None)
        return sorted(partitions)

    # -- commits -----------------------------------------------------------------
    def commit(self, partition: int, records: Sequence[tuple[StagedRecord, Any]], checkpoint: int) -> int:
        """Write committed ``records`` of ``partition`` (each with its metadata) and its new checkpoint in one
        batch, then forget the writes they carried; how many."""
        batch = WriteBatch(raw_mode=True)
        for record, _ in records:
            key = cast(bytes, record.key)  # a changelog record of the table's has one
            if record.value is None:
                batch.delete(key)
            else:
                batch.put(key, record.value)
        batch.put(CHECKPOINT_KEY, str(checkpoint).encode())
        batch.put(FORMAT_KEY, FORMAT)
        if self.changelog_partitions is not None:
            batch.put(PARTITIONS_KEY, str(self.changelog_partitions).encode())
        self.partition_db(partition).write(batch)
        return sum(self.writes.committed(partition, cast(bytes, record.key), record.write, metadata)
                   for record, metadata in records)

    def set_persisted_offset(self, tp: Any, offset: int) -> None:
        """Ignored: this store writes its checkpoints itself, with the writes they cover.

        (Faust calls it for each changelog record sent under at-least-once, and in any order.)
        """

    # -- restores ----------------------------------------------------------------
    def restores_in_batches(self) -> bool:
        """Whether a fetched changelog batch may reach Faust's recovery as its last record alone.

        Not for a table with its own ``on_changelog_event`` callback: that one sees every record.
        """
        return not faust_internals.has_changelog_callback(self.table)

    def precede(self, partition: int, offset: int, records: Sequence[Any]) -> None:
        """Changelog ``records`` of ``partition`` fetched just before the one at ``offset``.

        Only that last record goes through Faust's recovery (its dispatch costs
        hundreds of microseconds per record); these are applied with it, before it,
        when Faust applies it (:meth:`apply_changelog_batch`). If Faust never
        applies it, they are not applied either, as they would not have been.
        """
        self._preceding.setdefault(partition, {})[offset] = records

    def _preceded(self, partition: int, offset: int) -> Sequence[Any]:
        entries = self._preceding.get(partition)
        if not entries:
            return ()
        records = entries.pop(offset, ())
        # A batch whose last record Faust dropped (a rebalance came) will not be applied: forget it.
        for stale in [other for other in entries if other < offset]:
            del entries[stale]
        return records

    def apply_changelog_batch(self, batch: Iterable[Any], to_key: Any, to_value: Any) -> None:
        """A restore's records, those each one stands for first, and per partition its checkpoint, in one write."""
        writes: dict[int, WriteBatch] = {}
        checkpoints: dict[int, int] = {}
        applied: dict[Any, int] = {}
        for event in batch:
            message = event.message
            partition = message.partition
            write = writes.get(partition)
            if write is None:
                write = writes[partition] = WriteBatch(raw_mode=True)
            preceding = self._preceded(partition, message.offset)
            for record in itertools.chain(preceding, (message,)):
                if record.value is None:
                    write.delete(record.key)
                else:
                    write.put(record.key, record.value)
            checkpoints[partition] = max(message.offset, checkpoints.get(partition, -1))
            applied[message.tp] = applied.get(message.tp, 0) + len(preceding) + 1
        for partition, write in writes.items():
            write.put(CHECKPOINT_KEY, str(checkpoints[partition]).encode())
            write.put(FORMAT_KEY, FORMAT)
            self.partition_db(partition).write(write)
        standbys = cast("TableManager", self.app.tables).recovery.standby_tps
        for tp, count in applied.items():
            kind = "standby" if tp in standbys else "active"
            metrics.changelog_records_restored.labels(self.table.name, str(tp.partition), kind).inc(count)

    def revoke_partitions(self, table: Any, tps: Set[TP]) -> None:
        for tp in tps:
            if tp.topic in table.changelog_topic.topics:
                self._preceding.pop(tp.partition, None)
        super().revoke_partitions(table, tps)

    # -- reads -------------------------------------------------------------------
    def raw_key(self, key: Any) -> bytes:
        """``key`` as the store and the changelog hold it."""
        raw = self._codecs.dumps_key(self.key_type, key, self.key_serializer)
        if raw is None:
            raise TypeError("Table key cannot be None")  # as Faust's store says it
        return raw

    def raw_value(self, value: Any) -> Optional[bytes]:
        """``value`` as the store and the changelog hold it."""
        return self._codecs.dumps_value(self.value_type, value, self.value_serializer)

    def decoded(self, raw_value: bytes) -> Any:
        """A stored value as the table reads it."""
        return self._value_loader()(raw_value)

    def _value_loader(self) -> Callable[[bytes], Any]:
        load = self.__dict__.get("_load_value")
        if load is None:
            load = self.__dict__["_load_value"] = self._codecs.value_loader(self.value_type, self.value_serializer)
        return load

    def decoded_key(self, raw: bytes) -> Any:
        """A stored key as the table reads it."""
        return self._codecs.loads_key(self.key_type, raw, self.key_serializer)

    def value_of(self, partition: int, raw: bytes) -> Any:
        """The table's value of raw key ``raw`` in ``partition``, decoded: its latest write, committed or not;
        else MISSING."""
        write = self.writes.latest(partition, raw)
        if write is not None:
            value = self.writes.read(write)
            return MISSING if value is DELETED else value
        value = self.partition_db(partition).get(raw)
        return MISSING if value is None else self.decoded(value)

    def holds_value(self, partition: int, raw: bytes) -> bool:
        """Whether ``partition`` holds raw key ``raw`` (its latest write, committed or not)."""
        write = self.writes.latest(partition, raw)
        if write is None:
            return self.partition_db(partition).get(raw) is not None
        return write.raw is not None

    def read_key(self, key: bytes) -> Optional[bytes]:
        write = self._latest_write(key)
        return write.raw if write is not None else super().read_key(key)

    def holds_key(self, key: bytes) -> bool:
        write = self._latest_write(key)
        return write.raw is not None if write is not None else super().holds_key(key)

    def _latest_write(self, key: bytes) -> Optional[Write]:
        event = current_event()
        if event is not None and not self.table.is_global and not self.table.use_partitioner:
            return self.writes.latest(event.message.partition, key)
        for partition in self.writes.partitions():
            write = self.writes.latest(partition, key)
            if write is not None:
                return write
        return None

    def items_of_active_partitions(self) -> Iterator[tuple[bytes, bytes]]:
        for partition, db in self.active_partition_dbs().items():
            written = dict(self.writes.keys_of(partition))
            for key, value in db.items():
                if key in OWN_KEYS or key in written:
                    continue
                yield key, value
            for key, write in written.items():
                if write.raw is not None:
                    yield key, write.raw

    def committed_entries(
        self, partition: int, *, after: Optional[bytes], limit: int
    ) -> tuple[list[tuple[bytes, Any]], Optional[bytes]]:
        """Up to ``limit`` committed entries of ``partition`` past raw key ``after``: raw key, value as the
        table reads it.

        Keys with a write waiting for its commit are left out. Also returns where the
        next call goes on from: the last raw key read, or None once the end was reached.
        """
        held, decoded = self.writes.keys_of(partition), self._value_loader()
        entries, last = [], None
        for raw, value in self.partition_db(partition).items(from_key=after):
            if raw == after:
                continue
            last = raw
            if raw not in OWN_KEYS and raw not in held:
                entries.append((raw, decoded(value)))
            limit -= 1
            if limit == 0:
                return entries, last
        return entries, None

    def uncommitted_values(self, partition: int) -> Iterator[Any]:
        """The newest value written to each key of ``partition`` since its last commit (deletes left out)."""
        read = self.writes.read
        for write in list(self.writes.keys_of(partition).values()):
            value = read(write)
            if value is not DELETED:
                yield value

    def committed_key_counts(self) -> dict[int, int]:
        """Keys held in RocksDB per open table partition (committed state; not the store's own keys)."""
        counts = {}
        for partition, db in list((faust_internals.table_partition_dbs(self) or {}).items()):
            try:
                counts[partition] = sum(1 for key in db.keys() if key not in OWN_KEYS)
            except Exception:  # closed meanwhile (rebuilt or revoked)
                continue
        return counts

    # -- trust -------------------------------------------------------------------
    def checkpoint(self, partition: int) -> Optional[int]:
        """The changelog offset the local state of ``partition`` holds up to; None if none, or unreadable."""
        try:
            raw = self.partition_db(partition).get(CHECKPOINT_KEY)
        except Exception:  # locked or corrupt: :meth:`untrusted` tells which
            return None
        return None if raw is None else int(raw)

    def untrusted(self, partition: int, *, changelog_start: int, changelog_end: int) -> Optional[str]:
        """Why the local state of ``partition`` cannot be trusted, or None if it can.

        ``changelog_start``: the changelog's first offset; ``changelog_end``:
        the offset past its last committed record.
        """
        try:
            db = self.partition_db(partition)
        except Exception as exc:  # rocksdict raises plain exceptions for corrupt files
            if "lock" in repr(exc).lower():
                return None  # another worker's process still holds it: Faust retries the open
            return f"its database cannot be opened ({exc})"
        raw = db.get(CHECKPOINT_KEY)
        if raw is None:
            return None if next(iter(db.keys()), None) is None else "it holds keys but no checkpoint"
        if db.get(FORMAT_KEY) != FORMAT:
            return "its checkpoint was written by a store that also wrote uncommitted state"
        checkpoint = int(raw)
        if checkpoint >= changelog_end:
            return f"its checkpoint {checkpoint} is past the changelog's last committed record ({changelog_end - 1})"
        if checkpoint + 1 < changelog_start:
            return (f"the changelog now starts at {changelog_start}, past its checkpoint {checkpoint}: "
                    "records between are gone")
        partitions = db.get(PARTITIONS_KEY)
        if (partitions is not None and self.changelog_partitions is not None
                and int(partitions) != self.changelog_partitions):
            return (f"it was written when the changelog had {int(partitions)} partitions, "
                    f"now {self.changelog_partitions}")
        return None

    def rebuild(self, partition: int, why: str) -> int:
        """Delete the local state of ``partition``; a restore rebuilds it from the whole changelog.

        Returns how many writes not yet committed it forgot.
        """
        dropped = self.writes.drop(partition)
        faust_internals.close_table_partition(self, partition)
        shutil.rmtree(self.partition_path(partition), ignore_errors=True)
        log.warning("Rebuilding table %s partition %d from its changelog: %s", self.table.name, partition, why)
        return dropped
