"""A table's writes that have not committed yet, kept by the table itself until their commit.

Each write is kept per table partition and key, with the input partition and
offset of the event that made it (:class:`Write`). Reads see a key's newest
write at once; RocksDB holds only committed state. A commit of an input
partition up to an offset takes, per key, the newest write that events below
that offset made (:meth:`TableWrites.committable`), so the changelog gets one
record per key per commit however often the key was written. Writes of events
the commit does not reach (another agent of the same input still works on an
earlier event) stay for the next commit; the older ones are superseded.

A read of a key written since the last commit gets what decoding the write
would give, as it would after a restart: a str, int, finite float or bool is
the written object itself (immutable), without decoding; any other value,
records included, is decoded from the write's bytes, so each read is a value of
its own that the agent may change in place, and a value changed in place after
its write reads as written. Keeping a copy of each record written instead would
cost every write a copy, and most keys written are not read again before their
commit.

Each immutable type is checked against real decoding once: its first value
written is decoded and compared; a type whose values do not read back as
written is decoded on every read.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

from faust_eos import faust_internals


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: the value of a write that reads decode from its bytes
DECODE: Any = _Marker("DECODE")
#: what a read of a deleted key gives
DELETED: Any = _Marker("DELETED")


class Write:
    """One uncommitted write of a key."""

    __slots__ = ("source", "offset", "value", "raw", "callbacks", "older")

    def __init__(self, source: Any, offset: int, value: Any, raw: Optional[bytes],
                 callbacks: Optional[list[Callable[[Any], None]]], older: Optional["Write"]) -> None:
        self.source = source  # the input partition of the event that made it (SourceTP)
        self.offset = offset  # that event's input offset (staging.UNBOUND outside events)
        self.value = value  # what reads give: a kept value, DECODE, or DELETED
        self.raw = raw  # the changelog record's value; None for a delete
        #: called with the changelog record's metadata once committed (Faust's futures of its own table path)
        self.callbacks = callbacks
        self.older = older  # the key's previous write, if a commit may still need it


class TableWrites:
    """One table's uncommitted writes, per table partition and raw key."""

    def __init__(self, decode: Callable[[bytes], Any]) -> None:
        self._decode = decode
        self._partitions: dict[int, dict[bytes, Write]] = {}
        #: writes kept, each version counted (the memory they hold)
        self.count = 0
        #: immutable type -> whether its values read back as written (learnt from its first)
        self._types: dict[type, bool] = {}

    def write(self, partition: int, raw_key: bytes, value: Any, raw: Optional[bytes], source: Any, offset: int,
              callback: Optional[Callable[[Any], None]] = None) -> int:
        """Keep a write: ``value`` (DELETED for a delete, DECODE if only its bytes are known) encoded as ``raw``.

        Returns how many more writes are kept: 0 if it replaced a write of the same event.
        """
        keys = self._partitions.get(partition)
        if keys is None:
            keys = self._partitions[partition] = {}
        if value is not DELETED and value is not DECODE:
            value = self._kept(value, raw)
        head = keys.get(raw_key)
        callbacks = [callback] if callback is not None else None
        if head is not None and head.offset == offset and head.source == source:  # again in the same event
            if head.callbacks:
                callbacks = head.callbacks + (callbacks or [])
            keys[raw_key] = Write(source, offset, value, raw, callbacks, head.older)
            return 0
        keys[raw_key] = Write(source, offset, value, raw, callbacks, head)
        self.count += 1
        return 1

    def latest(self, partition: int, raw_key: bytes) -> Optional[Write]:
        """The newest uncommitted write of ``raw_key``, if any."""
        keys = self._partitions.get(partition)
        return keys.get(raw_key) if keys else None

    def read(self, write: Write) -> Any:
        """What a read of ``write`` gives, as decoding its bytes would; DELETED for a delete."""
        value = write.value
        if value is DECODE:
            return self._decode(write.raw)  # type: ignore[arg-type]
        return value

    def keys_of(self, partition: int) -> Mapping[bytes, Write]:
        """The keys of ``partition`` written since their last commit."""
        return self._partitions.get(partition) or {}

    def partitions(self) -> Iterator[int]:
        return iter(list(self._partitions))

    def committable(self, partition: int, up_to: Mapping[Any, int]) -> list[tuple[bytes, Write]]:
        """Per key of ``partition``, the newest write of an event below ``up_to[its input partition]``."""
        taken = []
        write: Optional[Write]
        for raw_key, write in self._partitions.get(partition, {}).items():
            while write is not None:
                limit = up_to.get(write.source)
                if limit is not None and write.offset < limit:
                    taken.append((raw_key, write))
                    break
                write = write.older
        return taken

    def committed(self, partition: int, raw_key: bytes, write: Write, metadata: Any) -> int:
        """``write`` committed as the changelog record ``metadata``: forget it and the older writes it
        superseded, and tell their callbacks. Returns how many writes were forgotten."""
        keys = self._partitions.get(partition, {})
        newer, node = None, keys.get(raw_key)
        while node is not None and node is not write:
            newer, node = node, node.older
        if node is None:  # dropped meanwhile
            return 0
        if newer is None:
            del keys[raw_key]
        else:
            newer.older = None
        forgotten = 0
        while node is not None:
            forgotten += 1
            for callback in node.callbacks or ():
                callback(metadata)
            node = node.older
        self.count -= forgotten
        return forgotten

    def drop(self, partition: int, sources: Optional[Iterable[Any]] = None) -> int:
        """Forget the writes of ``partition`` (only those of events from ``sources``, if given); how many."""
        keys = self._partitions.get(partition)
        if not keys:
            return 0
        before = self.count
        if sources is None:
            for write in keys.values():
                self.count -= _length(write)
            del self._partitions[partition]
            return before - self.count
        gone = set(sources)
        for raw_key, write in list(keys.items()):
            kept = [node for node in _chain(write) if node.source not in gone]
            self.count -= _length(write) - len(kept)
            head = None
            for node in reversed(kept):
                node.older, head = head, node
            if head is None:
                del keys[raw_key]
            else:
                keys[raw_key] = head
        return before - self.count

    def _kept(self, value: Any, raw: Optional[bytes]) -> Any:
        """What reads of ``value`` (encoded as ``raw``) get: itself if immutable and it reads back as written,
        else DECODE."""
        if not faust_internals.shareable(value):
            return DECODE
        kind = type(value)
        reads_back = self._types.get(kind)
        if reads_back is None and raw is not None:
            decoded = self._decode(raw)
            reads_back = self._types[kind] = type(decoded) is kind and decoded == value
        return value if reads_back else DECODE


def _chain(write: Optional[Write]) -> Iterator[Write]:
    while write is not None:
        yield write
        write = write.older


def _length(write: Write) -> int:
    return sum(1 for _ in _chain(write))
