"""Stand-ins for the commit path: confluent_kafka's transactional Producer, a partition's transaction, the tables.

The fake producer is scripted step by step. It keeps the transaction's records
apart until ``commit_transaction`` makes them visible, and can be told to fail
or block any call, to keep its local queue full, and to report errors (or
nothing) in delivery callbacks.
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, Callable, Optional

from confluent_kafka import KafkaError, KafkaException

from faust_eos.state.staging import UNBOUND, SourceTP, StagedRecord


class FakeMessage:
    """What a delivery callback receives for a delivered record."""

    def __init__(self, topic: str, partition: int, offset: int, timestamp_ms: int) -> None:
        self._topic, self._partition, self._offset, self._timestamp_ms = topic, partition, offset, timestamp_ms

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp_ms  # TIMESTAMP_CREATE_TIME


class FakeProducer:
    """Records every call in ``calls``; ``visible`` holds what committed transactions produced."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.calls: list[str] = []
        self.visible: list[tuple[str, Optional[bytes]]] = []
        self.offsets_sent: list[tuple[list, Any]] = []
        #: errors a call raises, one per call, in order
        self.failures: dict[str, list[KafkaError]] = {}
        #: calls that wait on their Event before doing anything
        self.blocked: dict[str, threading.Event] = {}
        #: set once a blocked call is waiting
        self.entered = threading.Event()
        #: polls it takes to drain a full local queue; None: it never drains
        self.full_for_polls: Optional[int] = 0
        #: per record index in the transaction: the error its delivery callback reports
        self.delivery_errors: dict[int, KafkaError] = {}
        #: record indexes whose delivery callback flush never calls (still in flight)
        self.in_flight: set[int] = set()
        #: records in flight that each flush lands, lowest index first (deliveries coming slowly)
        self.lands_per_flush = 0
        #: per topic: the error its metadata answer carries (the call itself succeeds)
        self.topic_errors: dict[str, KafkaError] = {}
        #: per topic: what list_topics raises instead of answering (librdkafka refusing the name)
        self.topic_refusals: dict[str, Exception] = {}
        self._transaction: list[tuple[str, Optional[bytes], Callable]] = []
        self._served: set[int] = set()  # record indexes whose delivery callback was called

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name in self.blocked:
            self.entered.set()
            self.blocked[name].wait()
        if self.failures.get(name):
            raise KafkaException(self.failures[name].pop(0))

    def init_transactions(self, timeout: float) -> None:
        self._call("init_transactions")

    def begin_transaction(self) -> None:
        self._call("begin_transaction")
        self._transaction, self._served = [], set()

    def produce(self, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None, partition: int = -1, *,
                on_delivery: Optional[Callable] = None, **kwargs: Any) -> None:
        """As confluent-kafka's: topic, value, key and partition may be given by position, in that order."""
        self._call("produce")
        if self.full_for_polls is None or self.full_for_polls > 0:
            raise BufferError("Local: Queue full")
        self._transaction.append((topic, value, on_delivery))

    def list_topics(self, topic: Optional[str] = None, timeout: float = -1) -> SimpleNamespace:
        self._call(f"list_topics {topic}")
        if topic in self.topic_refusals:
            raise self.topic_refusals[topic]
        return SimpleNamespace(topics={topic: SimpleNamespace(error=self.topic_errors.get(topic))})

    def poll(self, timeout: float) -> int:
        self.calls.append("poll")
        if self.full_for_polls:
            self.full_for_polls -= 1
        return self._serve_reports()

    def flush(self, timeout: float) -> int:
        """As librdkafka's: serves the reports, and waits out ``timeout`` while records are still in flight."""
        self._call("flush")
        for index in sorted(self.in_flight)[:self.lands_per_flush]:
            self.in_flight.discard(index)
        self._serve_reports()
        if self.in_flight:
            time.sleep(timeout)
        return len(self.in_flight)

    def _serve_reports(self) -> int:
        """Calls the delivery callbacks not called yet, except those of records in flight; how many."""
        served = 0
        for index, (topic, _value, on_delivery) in enumerate(self._transaction):
            if index in self._served or index in self.in_flight or on_delivery is None:
                continue  # (a record produced without a callback is not reported)
            served += 1
            self._served.add(index)
            if index in self.delivery_errors:
                on_delivery(self.delivery_errors[index], None)
            else:
                on_delivery(None, FakeMessage(topic, 0, len(self.visible) + index, 1_700_000_000_000))
        return served

    def send_offsets_to_transaction(self, offsets: list, group: Any, timeout: float) -> None:
        self._call("send_offsets_to_transaction")
        self.offsets_sent.append((offsets, group))

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit_transaction")
        unreported = [i for i, (_, _, on_delivery) in enumerate(self._transaction) if on_delivery is None]
        if any(i in self.delivery_errors for i in unreported):  # as librdkafka: a failed record fails the commit
            raise KafkaException(error(KafkaError._INCONSISTENT, txn_requires_abort=True))
        self.visible.extend((topic, value) for topic, value, _ in self._transaction)
        self._transaction = []

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort_transaction")
        self._transaction = []


def error(code: int, *, fatal: bool = False, retriable: bool = False, txn_requires_abort: bool = False) -> KafkaError:
    return KafkaError(code, KafkaError(code).str(), fatal=fatal, retriable=retriable,
                      txn_requires_abort=txn_requires_abort)


class FakeTransaction:
    """The worker's producer: claims its id or fails to, then commits or raises as told, one outcome per
    commit; remembers what it was given."""

    transactional_id = "app-worker-w1"

    def __init__(self, *failures: Optional[Exception], claim_fails: bool = False) -> None:
        self.failures = list(failures)
        self.claim_fails = claim_fails
        self.claimed = False
        self.commits: list[tuple[list[bytes], dict, Optional[bytes]]] = []
        self.closed = False

    async def init(self) -> None:
        if self.claim_fails:
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
        self.claimed = True

    async def commit(self, records, offsets=None, group=None):
        self.commits.append(([record.value for record in records], dict(offsets or {}), group))
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        return [f"md-{record.value.decode()}" for record in records]

    def close(self) -> None:
        self.closed = True


class FakeTables:
    """Table writes kept as the tables keep them: a commit takes each key's newest write below its offset.

    Records which writes were stored as committed, which were dropped, and
    which were handed back after a failed commit.
    """

    def __init__(self, changelog: str = "app-counts-changelog") -> None:
        self.changelog = changelog
        self.changelog_topics = frozenset({changelog})
        self.writes: list[tuple[SourceTP, int, bytes, bytes]] = []
        self.stored: list[tuple[bytes, Any]] = []
        self.released: list[bytes] = []
        self.not_committed_records: list[bytes] = []

    def write(self, source: SourceTP, offset: int, key: bytes, value: bytes) -> None:
        self.writes.append((source, offset, key, value))

    def hold(self, record: StagedRecord, source: SourceTP) -> None:
        self.write(source, record.source_offset, record.key, record.value)

    def held(self) -> int:
        return len(self.writes)

    def unbound_sources(self) -> set[SourceTP]:
        return {source for source, offset, _, _ in self.writes if offset == UNBOUND}

    def changelog_records(self, up_to: dict) -> list[StagedRecord]:
        newest: dict[bytes, StagedRecord] = {}
        for source, offset, key, value in self.writes:
            if source in up_to and offset < up_to[source]:
                newest[key] = StagedRecord(topic=self.changelog, key=key, value=value, partition=source.partition,
                                           timestamp_ms=None, headers=None, source_offset=offset)
        return list(newest.values())

    def committed(self, records: list, metadata: list) -> None:
        self.stored += [(r.value, md) for r, md in zip(records, metadata)]
        done = {r.key: r.source_offset for r in records}
        self.writes = [w for w in self.writes if done.get(w[2], UNBOUND - 1) < w[1]]

    def not_committed(self, records: list) -> None:
        self.not_committed_records += [r.value for r in records]

    def drop(self, source: SourceTP) -> int:
        dropped = [w for w in self.writes if w[0] == source]
        self.released += [w[3] for w in dropped]
        self.writes = [w for w in self.writes if w[0] != source]
        return len(dropped)
