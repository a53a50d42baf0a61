"""Which input records the agents were handed, and how far a commit may reach.

Under exactly-once, a worker hands each input record to its agents once per
ownership of the partition: handed out twice, an event is applied twice to the
table state that already holds it, and both updates commit together. Faust's
consumer does not promise that on its own:

* it seeks partitions back to their committed offsets at moments of its own
  (when recovery completes, just after resuming the partitions; whenever it
  fetches while the flow is stopped), so records the agents already took are
  fetched and handed out again;
* it drops records it has fetched (when the flow stops or the generation
  changes in the middle of a batch, for a partition not active), counting on
  such a seek to fetch them again, while its bookkeeping of skipped offsets can
  count the dropped records as settled and let a commit pass them.

:class:`Delivery` replaces that bookkeeping for the input partitions a worker
owns. Once a partition is positioned (at its committed offset, after the
partition was claimed), it keeps:

* the records fetched and not handed out yet, in offset order. Only the first
  of them may be handed out next, and those a fetch dropped are offered again
  with the next one;
* the records handed out and not yet processed (acknowledged by every
  stream that took them). A batch (:mod:`faust_eos.short_paths.batches`) is handed out
  and acknowledged as one message.

A commit reaches up to the first record handed out and not processed, or past
the last one handed out. A fetch that overlapped a seek of a partition may
bring records from the old position: they are ignored, and the partition is
sought back to its resume point to fetch them again.
"""
from __future__ import annotations

from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Iterator, Mapping, Optional, Sequence

from faust.types import TP

from faust_eos.short_paths.unpacking import first_record_not_done


@dataclass
class _Partition:
    next_offset: int  # every offset below was handed out, or holds no record
    waiting: deque[Any] = field(default_factory=deque)  # fetched, not handed out: records, ascending offsets
    in_flight: dict[int, Any] = field(default_factory=dict)  # handed out, not processed: offset -> message, ascending


class Delivery:
    """Per owned input partition: what was fetched, handed out and processed."""

    def __init__(self) -> None:
        self._partitions: dict[TP, _Partition] = {}
        self._clock = count(1)
        self._now = 0
        self._last_seek: dict[TP, int] = {}
        self._seeking: set[TP] = set()

    # -- ownership -------------------------------------------------------------
    def close(self) -> None:
        """Forget every partition: nothing is handed out or committed until positioned again."""
        self._partitions.clear()

    def position(self, tp: TP, offset: int) -> None:
        """Start handing out ``tp`` from ``offset``, where the consumer was just positioned."""
        self._partitions[tp] = _Partition(next_offset=offset)
        self._stamp_seek(tp)

    def resume_point(self, tp: TP) -> Optional[int]:
        """Where fetching ``tp`` must resume: the offset after the last record handed out."""
        partition = self._partitions.get(tp)
        return None if partition is None else partition.next_offset

    @contextmanager
    def seeking(self, tp: TP) -> Iterator[None]:
        """Wrap a seek of ``tp``: fetches overlapping it are ignored for ``tp``."""
        self._seeking.add(tp)
        try:
            yield
        finally:
            self._seeking.discard(tp)
            self._stamp_seek(tp)

    def _stamp_seek(self, tp: TP) -> None:
        self._now = next(self._clock)
        self._last_seek[tp] = self._now

    # -- fetching and handing out ----------------------------------------------
    def fetch_started(self) -> int:
        """A token for :meth:`fetched`: taken before a fetch begins."""
        return self._now

    def fetched(self, records: Mapping[TP, Sequence[Any]], started: int) -> tuple[dict[TP, list[Any]], set[TP]]:
        """Note a fetch's records; return what to offer, per partition, in offset order, and what to seek again.

        For a positioned partition the offer is every record fetched and not
        handed out yet, including those an earlier fetch brought and Faust
        dropped. Records of other partitions (not positioned, not owned) pass
        unchanged. A positioned partition whose records were ignored (the fetch
        overlapped a seek of it) must be sought back to its resume point: the
        consumer's position has moved past them.
        """
        offered: dict[TP, list[Any]] = {}
        ignored: set[TP] = set()
        for tp, batch in records.items():
            partition = self._partitions.get(tp)
            if partition is None:
                offered[tp] = list(batch)
            elif tp in self._seeking or self._last_seek.get(tp, 0) > started:
                ignored.add(tp)
            else:
                _note(partition, batch)
        for tp, partition in self._partitions.items():
            if partition.waiting:
                offered[tp] = list(partition.waiting)
        return offered, ignored

    def admit(self, tp: TP, message: Any, first_offset: Optional[int] = None) -> bool:
        """Whether to hand ``message`` to the agents: only the first record waiting may go.

        A message standing for a batch (:mod:`faust_eos.short_paths.batches`) takes every record
        from ``first_offset`` to its own offset; the first of them must be the first waiting.
        """
        partition = self._partitions.get(tp)
        first = message.offset if first_offset is None else first_offset
        if partition is None or not partition.waiting or first != partition.waiting[0].offset:
            return False
        waiting = partition.waiting
        while waiting and waiting[0].offset <= message.offset:
            waiting.popleft()
        partition.next_offset = message.offset + 1
        partition.in_flight[first] = message
        return True

    # -- commits ---------------------------------------------------------------
    def committable(self, tp: TP) -> Optional[int]:
        """The offset a commit of ``tp`` may reach now; None if ``tp`` is not positioned."""
        partition = self._partitions.get(tp)
        if partition is None:
            return None
        in_flight = partition.in_flight
        while in_flight:
            offset = next(iter(in_flight))
            message = in_flight[offset]
            if not message.acked:  # set once every stream that took it is done with it
                partly_done = first_record_not_done(message)  # a batch unpacked into its records
                return offset if partly_done is None else partly_done
            del in_flight[offset]
        return partition.next_offset


def _note(partition: _Partition, batch: Sequence[Any]) -> None:
    """Add a fetch's records of ``partition`` past what was handed out to those waiting."""
    fresh = [record for record in batch if record.offset >= partition.next_offset]
    if not fresh:
        return
    waiting = partition.waiting
    ascending = all(earlier.offset < later.offset for earlier, later in zip(fresh, fresh[1:]))
    if ascending and (not waiting or fresh[0].offset > waiting[-1].offset):
        waiting.extend(fresh)  # the usual case: the records that follow the last one fetched
        return
    # records fetched again (a seek, or records Faust dropped): the newest fetch of each offset wins
    by_offset = {record.offset: record for record in waiting}
    by_offset.update((record.offset, record) for record in fresh)
    partition.waiting = deque(by_offset[offset] for offset in sorted(by_offset))
