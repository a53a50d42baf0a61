"""Table values written since the last commit, read back without decoding them.

Inside a commit interval an agent reads the keys it has just written far more
often than any other (a running total read and written again at every event).
Each read must give what decoding the value's bytes gives, as it would after a
restart, and a value of its own that the agent may change in place. So a read
of such a key gets, without decoding:

* for a str, int, finite float or bool: the written object itself (immutable);
* for a plain record (:func:`faust_eos.faust_internals.plain_record_fields`)
  whose fields hold only such values: a copy of the record as it was written,
  each read a copy of its own.

Each type is checked against real decoding once: its first value written is
decoded and compared. A type whose values do not read back as written (another
codec, a model that changes what it decodes), and any other value, is decoded
on every read.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from faust_eos import faust_internals


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: what a read of a value not remembered here returns
NOT_REMEMBERED: Any = _Missing()


class WrittenValues:
    """Per table partition, the values of keys written since the last commit, kept to be read back."""

    def __init__(self, decode: Callable[[bytes], Any]) -> None:
        self._decode = decode
        #: table partition -> raw key -> (the held changelog record of the write, the value, whether reads copy it)
        self._values: dict[int, dict[bytes, tuple[Any, Any, bool]]] = {}
        #: type -> whether its values read back as written; None once found not to, or not plain
        self._types: dict[type, Optional[Callable[[Any], bool]]] = {}

    def remember(self, partition: int, raw: bytes, held: Any, value: Any) -> None:
        """Let reads of ``raw`` in ``partition`` give ``value``, written as ``held`` (its changelog record),
        until that record is released."""
        kind = type(value)
        keeps = self._types.get(kind, _unknown)
        if keeps is _unknown:
            keeps = self._learn(kind, value, held.value)
            if keeps is not _unknown:
                self._types[kind] = keeps
        if keeps is None or not keeps(value):
            return
        copied = kind not in faust_internals.IMMUTABLE
        self._values.setdefault(partition, {})[raw] = (
            held, faust_internals.copy_record(value) if copied else value, copied)

    def read(self, partition: int, raw: bytes, held: Any) -> Any:
        """The value ``held`` wrote, as decoding would give it; :data:`NOT_REMEMBERED` if it was not kept."""
        entry = self._values.get(partition, {}).get(raw)
        if entry is None or entry[0] is not held:
            return NOT_REMEMBERED
        _, value, copied = entry
        return faust_internals.copy_record(value) if copied else value

    def forget(self, partition: int, raw: bytes, held: Any = None) -> None:
        """Forget the value of ``raw`` (only if written by ``held``, when given)."""
        values = self._values.get(partition)
        if values is not None and raw in values and (held is None or values[raw][0] is held):
            del values[raw]

    def forget_partition(self, partition: int) -> None:
        self._values.pop(partition, None)

    def kept(self, partition: int) -> int:
        """How many values of ``partition`` are kept."""
        return len(self._values.get(partition, ()))

    def _learn(self, kind: type, value: Any, raw_value: Optional[bytes]) -> Optional[Callable[[Any], bool]]:
        """How to tell the values of ``kind`` that read back as written; None if none do, and a
        function saying no to every value if this one cannot tell (it is learnt from the next)."""
        if kind in faust_internals.IMMUTABLE:
            keeps: Callable[[Any], bool] = faust_internals.shareable
        elif faust_internals.plain_record_fields(kind) is not None:
            keeps = faust_internals.holds_shareable_fields
        else:
            return None
        if raw_value is None or not keeps(value):
            return _unknown
        decoded = self._decode(raw_value)
        reads_back = type(decoded) is kind and decoded == value and (
            kind in faust_internals.IMMUTABLE or vars(decoded) == vars(faust_internals.copy_record(value)))
        return keeps if reads_back else None


def _unknown(value: Any) -> bool:
    """Stands for a type not learnt yet: none of its values is kept."""
    return False
