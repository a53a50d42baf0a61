"""Offsets as exactly-once needs them: stable committed offsets, and where restores end (and which topics exist).

A committed offset still pending in a transaction (its commit markers not yet
written) is exactly the one that matters on a hand-over, and aiokafka cannot
ask for stable offsets. librdkafka's consumer can: with
``isolation.level=read_committed`` its offset fetch sets ``require_stable``,
and while a transaction holds an offset pending the broker answers
UNSTABLE_OFFSET_COMMIT and the question is asked again.

A changelog written in transactions does not end with a record: the offsets
just below its last stable offset hold commit markers (and maybe records of
aborted transactions), which no ``read_committed`` reader receives. A restore
is complete once it has applied the last committed record, so that is where
:meth:`CommittedOffsets.restore_ends` says it ends. Records committed after a
transaction that is still open lie past the last stable offset until it ends:
:meth:`CommittedOffsets.wait_for_open_transactions` waits for that first.

Blocking: run it in a thread.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Collection, Iterable, Mapping, Optional, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from faust_eos.errors import OffsetsLost
from faust_eos.state.table_state import ChangelogBounds

T = TypeVar("T")
log = logging.getLogger(__name__)

# Errors that pass once the broker has (re)loaded its partitions and coordinators.
TRANSIENT_CODES = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.UNSTABLE_OFFSET_COMMIT,
    KafkaError._TIMED_OUT_QUEUE,  # the request waited in librdkafka's queue for a broker coming back
    KafkaError.NOT_LEADER_FOR_PARTITION,  # leadership not settled yet after a broker restart
    KafkaError.LEADER_NOT_AVAILABLE,
}


def changelogs_to_check(committed: Mapping[Any, Optional[int]], sources: Iterable[Any],
                        changelogs: Iterable[Any], standbys: Collection[Any] = ()) -> list[Any]:
    """The changelog partitions whose records would show that the group lost ``committed`` offsets.

    A table partition is written only in transactions that commit offsets of the
    input partition of the same number being processed. So where no input partition
    of a number (``sources``: every one assigned) has a committed offset, the
    changelog partitions of that number (``changelogs``: of tables written that way)
    can hold no committed record, unless the group lost its offsets. A number with
    an input partition not in ``committed`` (not claimed) is not judged, nor is a
    changelog partition the worker only keeps a standby copy of (in ``standbys``):
    another worker processes its input partitions, and the worker's own partitions
    of that number may be of other topics, such as Faust's one-partition leader topic.
    """
    numbers: dict[int, bool] = {}  # partition number -> no input partition of it has a committed offset
    for tp in sources:
        numbers[tp.partition] = numbers.get(tp.partition, True) and tp in committed and committed[tp] is None
    return [tp for tp in changelogs if numbers.get(tp.partition, False) and tp not in standbys]


def lost_offsets(group: str, committed: Mapping[Any, Optional[int]],
                 bounds: Mapping[Any, ChangelogBounds]) -> Optional[OffsetsLost]:
    """What to stop with if any of the changelog partitions of :func:`changelogs_to_check` holds a committed record."""
    holding = sorted((tp.topic, tp.partition) for tp, bound in bounds.items() if bound.end > bound.start)
    if not holding:
        return None
    numbers = {partition for _, partition in holding}
    lost = sorted((tp.topic, tp.partition) for tp, offset in committed.items()
                  if offset is None and tp.partition in numbers)
    return OffsetsLost(
        f"consumer group {group!r} holds no committed offset for {_partitions_text(lost)}, but the table "
        f"changelogs {_partitions_text(holding)} hold records that committed with offsets of these partitions: "
        "the group's offsets were lost (expired after the broker's offsets.retention.minutes while no worker "
        "ran, deleted, or dropped by the broker). Resuming from the first offset would process every event "
        "again, so the worker stops. To go on, commit each partition's offset to the group (kafka-consumer-groups.sh "
        "--reset-offsets ... --execute, with every worker stopped); to start over, delete the changelog topics too."
    )


def _partitions_text(tps: Iterable[tuple[str, int]]) -> str:
    """``topic[0, 1], other[2]``: the partitions of each topic together."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(f"{topic}[{', '.join(map(str, sorted(partitions)))}]"
                     for topic, partitions in sorted(by_topic.items()))


#: how far before the LSO a search for the last committed record starts; each miss widens it 8 times
FIRST_SEARCH_SPAN = 64


class CommittedOffsets:
    """Reads a consumer group's stable committed offsets, and where changelogs end; never joins the group.

    Safe to call from several threads, and to close while a call is running:
    the call gives up at its next step (closing a librdkafka client another
    thread is using crashes the process).
    """

    def __init__(self, client: Mapping[str, Any], group_id: str) -> None:
        """``client``: librdkafka settings, at least ``bootstrap.servers``
        (:func:`faust_eos.security.librdkafka_client`)."""
        common = {
            **client,
            "group.id": group_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
        self._consumer = Consumer(common)
        # its watermarks are the high watermarks, past records of transactions still pending
        self._uncommitted = Consumer({**common, "isolation.level": "read_uncommitted"})
        self._reader = Consumer({  # assigned partitions only, to find where they end
            **common,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
        })
        self._in_use = threading.Lock()
        self._closing = threading.Event()

    def read(self, tps: Iterable[Any], timeout_s: float = 60.0) -> dict[Any, Optional[int]]:
        """Committed offset of each of ``tps`` (anything with .topic and .partition); None if none."""
        tps = list(tps)

        def ask() -> dict[tuple[str, int], int]:
            self._raise_if_closing()
            result = self._consumer.committed([TopicPartition(tp.topic, tp.partition) for tp in tps], timeout=10)
            for partition in result:
                if partition.error is not None:
                    raise KafkaException(partition.error)
            return {(p.topic, p.partition): p.offset for p in result}

        with self._in_use:
            committed = retrying(ask, timeout_s)
        return {tp: (offset if (offset := committed[(tp.topic, tp.partition)]) >= 0 else None) for tp in tps}

    def topic_exists(self, topic: str, timeout_s: float = 30.0) -> bool:
        """Whether the cluster has ``topic``."""

        def ask() -> bool:
            self._raise_if_closing()
            metadata = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
            if metadata is None or metadata.error is None:
                return metadata is not None
            if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise KafkaException(metadata.error)

        with self._in_use:
            return retrying(ask, timeout_s)

    def restore_ends(self, tps: Iterable[Any], timeout_s: float = 60.0) -> dict[Any, int]:
        """For each of ``tps``: the offset just past its last committed record.

        Its log start offset if it holds no committed record. Searched backwards
        from the last stable offset, wider each time no record turns up.
        """
        return {tp: bounds.end for tp, bounds in self.restore_bounds(tps, timeout_s).items()}

    def wait_for_open_transactions(self, tps: Iterable[Any], within_s: float, timeout_s: float = 60.0) -> None:
        """Wait until every transaction open on ``tps`` now has ended: until each one's last stable
        offset reaches the high watermark it has now.

        A record committed after a transaction that is still open lies past the
        last stable offset, out of a ``read_committed`` reader's sight, until that
        transaction ends; a restore that ended before would miss it. Raises
        :class:`KafkaException` (``_TIMED_OUT``) naming the partitions still waited
        for after ``within_s``.
        """
        keys = [(tp.topic, tp.partition) for tp in tps]
        awaited = {key: high for key, (_, stable, high) in self._watermarks(keys, timeout_s).items() if high > stable}
        if awaited:
            log.info("Waiting up to %.0f s for the transactions open on %s to end: records committed after "
                     "them are out of a restore's sight until then", within_s, _partitions_text(awaited))
        deadline = time.monotonic() + within_s
        while awaited:
            if time.monotonic() >= deadline:
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT,
                    f"transactions on {_partitions_text(awaited)} still open after {within_s:.0f} s; one that "
                    "never ends needs an operator: write the markers the broker lost (faust-eos's lost-markers "
                    "command), or abort a hanging transaction (kafka-transactions.sh find-hanging)"))
            time.sleep(0.2)
            now = self._watermarks(list(awaited), timeout_s)
            awaited = {key: high for key, high in awaited.items() if now[key][1] < high}

    def _watermarks(self, keys: list[tuple[str, int]], timeout_s: float) -> dict[tuple[str, int], tuple[int, int, int]]:
        with self._in_use:
            return retrying(lambda: self._read_watermarks(keys), timeout_s)

    def _read_watermarks(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int, int]]:
        """(log start offset, last stable offset, high watermark) of each (topic, partition)."""
        marks = {}
        for topic, number in keys:
            self._raise_if_closing()
            partition = TopicPartition(topic, number)
            # the LSO first: a transaction settling in between then shows as pending, never the reverse
            low, stable = self._consumer.get_watermark_offsets(partition, timeout=10, cached=False)
            _, high = self._uncommitted.get_watermark_offsets(partition, timeout=10, cached=False)
            marks[(topic, number)] = (low, stable, high)
        return marks

    def restore_bounds(self, tps: Iterable[Any], timeout_s: float = 60.0) -> dict[Any, ChangelogBounds]:
        """For each of ``tps``: its :class:`ChangelogBounds`."""
        tps = list(tps)

        def ask() -> dict[tuple[str, int], ChangelogBounds]:
            deadline = time.monotonic() + timeout_s
            marks = self._read_watermarks([(tp.topic, tp.partition) for tp in tps])
            watermarks = {key: (low, stable) for key, (low, stable, _) in marks.items()}
            pending = {key: high > stable for key, (_, stable, high) in marks.items()}
            ends = {key: low for key, (low, _) in watermarks.items()}
            searching = {key for key, (low, stable) in watermarks.items() if stable > low}
            span = FIRST_SEARCH_SPAN
            while searching:
                starts = {key: max(watermarks[key][0], watermarks[key][1] - span) for key in searching}
                for key, last in self._last_records(starts, deadline).items():
                    if last is not None:
                        ends[key] = last + 1
                # search further back where no record turned up and the log start is not reached yet
                searching = {key for key in searching
                             if ends[key] == watermarks[key][0] and starts[key] > watermarks[key][0]}
                span *= 8
            return {key: ChangelogBounds(watermarks[key][0], end, pending[key]) for key, end in ends.items()}

        with self._in_use:
            found = retrying(ask, timeout_s)
        return {tp: found[(tp.topic, tp.partition)] for tp in tps}

    def _last_records(self, starts: dict[tuple[str, int], int],
                      deadline: float) -> dict[tuple[str, int], Optional[int]]:
        """Read each partition from its start offset to its end: the offset of the last record (None if none)."""
        last: dict[tuple[str, int], Optional[int]] = dict.fromkeys(starts)
        reading = set(starts)
        self._reader.assign([TopicPartition(topic, partition, offset) for (topic, partition), offset in starts.items()])
        try:
            while reading:
                self._raise_if_closing()
                if time.monotonic() > deadline:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "reading to the end of the changelogs"))
                for msg in self._reader.consume(500, timeout=0.2):
                    key = (msg.topic(), msg.partition())
                    error = msg.error()
                    if error is None:
                        if key in reading:
                            last[key] = msg.offset()
                    elif error.code() == KafkaError._PARTITION_EOF:
                        reading.discard(key)
                    else:
                        raise KafkaException(error)
        finally:
            self._reader.unassign()
        return last

    def interrupt(self) -> None:
        """Make a call still running give up at its next step, and every later call at once."""
        self._closing.set()

    def close(self) -> None:
        """Close the clients. Blocking: waits for a call still running to give up."""
        self.interrupt()
        with self._in_use:
            self._consumer.close()
            self._uncommitted.close()
            self._reader.close()

    def _raise_if_closing(self) -> None:
        if self._closing.is_set():
            raise KafkaException(KafkaError(KafkaError._DESTROY, "closing"))


def retrying(ask: Callable[[], T], timeout_s: float) -> T:
    """``ask()`` again while the broker answers with a transient error (e.g. just after a restart)."""
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        try:
            return ask()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            transient = error.retriable() or error.code() in TRANSIENT_CODES
            if time.monotonic() > deadline or not transient:
                raise
            if not told:
                log.info("Broker not ready to answer (%s); asking again for up to %.0f s", error.str(), timeout_s)
                told = True
            time.sleep(0.2)
