"""The worker's transactional producer: its input offsets commit with the records they caused.

Each worker commits through one transactional producer, with the
``transactional.id`` ``<app>-worker-<worker id>`` (the worker id is kept in
its data directory, :func:`faust_eos.committing.outside.worker_id`). A worker restarted
on its directory claims the same id, which aborts whatever its predecessor
left open. Records sent outside any event commit the same way, without
offsets, through a producer of their own (:mod:`faust_eos.committing.outside`). A commit
is one transaction, run start to finish on a worker thread::

    begin_transaction()
    list_topics(topic) for each topic this producer has not learnt yet
        (librdkafka would hold its records about a second, until its topic scan)
    produce(record) for every staged record the committed events caused
        (outputs and table changelog writes, in the order they were sent;
        a full local queue is waited out for at most one call timeout)
    flush()                                  every record acknowledged, or abort: waited for while
                                             deliveries come, within most of the transaction timeout
    send_offsets_to_transaction(offsets, the group's generation and member id)
    commit_transaction()                     a timeout resumes it once: it can no longer abort

Zombies are fenced by the group (KIP-447): the broker takes the offsets only
from the member of the group's current generation, so a worker paused or cut
off while the group moved on has its offsets refused, and its transaction is
aborted with every record in it. Nothing is produced outside this sequence, so
a transaction is open only for the few milliseconds of a commit and a crash at
any step leaves either all of it or none of it visible to ``read_committed``
readers.

Each librdkafka call on the producer's thread has a deadline: its own timeout,
``call_timeout_s``, plus a grace. A commit is watched step by step, so a slow
but healthy commit of many steps is never cut short, while one call that hangs
is seen within one deadline. Some librdkafka calls can block for ever when the
broker restarts (the group coordinator request inside
``send_offsets_to_transaction`` never times out): past the deadline the
producer is given up (:class:`TransactionStuck`) and the next claim of the id
fences it.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, TypeVar

from aiokafka.structs import RecordMetadata
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from faust_eos import metrics
from faust_eos.committing.produce import CallThread, produce_all, release
from faust_eos.state.staging import SourceTP, StagedRecord

log = logging.getLogger(__name__)

_T = TypeVar("_T")

FENCED_CODES = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


class ProducerFenced(Exception):
    """Another producer claimed this producer's transactional id: the producer is unusable."""


class TransactionFailed(Exception):
    """A transaction could not be committed and was aborted."""


class TransactionStuck(Exception):
    """A call into the producer did not return in time; the producer is unusable."""


#: time a step may take beyond its librdkafka call's own timeout (Python's own work, the thread's turn)
DEADLINE_GRACE_S = 5.0
#: how much of the transaction timeout the wait for its records' deliveries may take, from ``begin_transaction``;
#: the rest is left for sending the offsets and committing
DELIVERIES_SHARE_OF_TIMEOUT = 0.7


def worker_transactional_id(app_id: str, worker: str) -> str:
    return f"{app_id}-worker-{worker}"


def group_metadata(group_id: str, generation: int, member_id: str) -> bytes:
    """A group member's metadata for ``send_offsets_to_transaction``, serialized as librdkafka's own
    consumer gives it (``consumer_group_metadata()``, no ``group.instance.id``)."""
    return (b"CGMDv2:" + struct.pack("<i", generation) + group_id.encode() + b"\0" + member_id.encode() + b"\0"
            + b"\x01")


async def claimed(producer: Any) -> Any:
    """``producer`` (a :class:`TransactionalProducer`) once it holds its id; closed if the claim ends any other way."""
    try:
        await producer.init()
    except BaseException:
        producer.close()
        raise
    return producer


class TransactionalProducer:
    """A transactional producer, driven from the event loop: its calls run on a thread of its own."""

    def __init__(
        self,
        *,
        transactional_id: str,
        producer_config: dict[str, Any],
        call_timeout_s: float,
        producer_factory: Callable[[dict[str, Any]], Producer] = Producer,
        deadline_grace_s: float = DEADLINE_GRACE_S,
    ) -> None:
        self.transactional_id = transactional_id
        self._timeout_s = call_timeout_s
        self._deadline_grace_s = deadline_grace_s
        self._producer = producer_factory({**producer_config, "transactional.id": self.transactional_id})
        self._known_topics: set[str] = set()  # topics the producer holds metadata for
        self._thread = CallThread(f"eos-{self.transactional_id}")
        self._step = "nothing yet"  # the step running on the thread, named when one is stuck
        self._step_started = 0.0  # monotonic time it began
        self._step_alive = 0.0  # monotonic time it began or last made progress: it is stuck a deadline after that
        # the broker aborts a transaction past its timeout (librdkafka's default: 60 s): the wait for its records'
        # deliveries ends early enough for the rest of the commit
        transaction_s = producer_config.get("transaction.timeout.ms", 60_000) / 1000
        self._deliveries_within_s = transaction_s * DELIVERIES_SHARE_OF_TIMEOUT
        self._step_timed = False  # whether that step still runs, its duration not yet observed

    async def init(self) -> None:
        """Claim the id: aborts the transaction an earlier producer of the id left open, and fences it."""
        await self._call(self._init_transactions)

    async def commit(self, records: Sequence[StagedRecord], offsets: Optional[Mapping[SourceTP, int]] = None,
                     group: Optional[bytes] = None) -> list[RecordMetadata]:
        """Produce ``records`` and commit them with the input ``offsets`` (if any), atomically.

        ``group``: the committing member's :func:`group_metadata`, which the
        broker checks against the group's current generation. Returns each
        record's metadata, in order. Raises :class:`ProducerFenced` or
        :class:`TransactionFailed` (nothing became visible), or
        :class:`TransactionStuck` (the outcome is unknown until the id is claimed
        again). After any of them the producer is not used again (see
        :mod:`faust_eos.committing.commit`).
        """
        with metrics.commit_duration.time():
            return await self._call(self._commit, records, offsets, group)

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the producer's thread; stuck once one of its steps outlasts its deadline."""
        call = asyncio.wrap_future(self._thread.submit(fn, *args))
        submitted = time.monotonic()
        step_deadline_s = self._timeout_s + self._deadline_grace_s
        while True:
            # a step that began before this call was submitted belongs to an earlier call
            remaining_s = max(self._step_alive, submitted) + step_deadline_s - time.monotonic()
            if remaining_s <= 0:
                raise TransactionStuck(
                    f"{self.transactional_id}: {fn.__name__.lstrip('_')} stuck in {self._step} for more than "
                    f"{step_deadline_s:.1f} s"
                )
            done, _ = await asyncio.wait({call}, timeout=remaining_s)
            if done:
                return call.result()

    def _begin_step(self, name: str) -> None:
        """Runs on the producer's thread, before each step of a call; the step before it ends."""
        self._end_step()
        self._step = name
        self._step_started = self._step_alive = time.monotonic()
        self._step_timed = True

    def _step_progressed(self) -> None:
        """Runs on the producer's thread: the running step goes on making progress (it is not stuck)."""
        self._step_alive = time.monotonic()

    def _end_step(self) -> None:
        """Runs on the producer's thread: the running step's duration, observed under its call's name."""
        if self._step_timed:
            self._step_timed = False
            metrics.transaction_step_duration.labels(self._step.split(" ", 1)[0]).observe(
                time.monotonic() - self._step_started)

    def _init_transactions(self) -> None:
        self._begin_step("init_transactions")
        try:
            self._producer.init_transactions(self._timeout_s)
        finally:
            self._end_step()

    def _commit(self, records: Sequence[StagedRecord], offsets: Optional[Mapping[SourceTP, int]],
                group: Optional[bytes]) -> list[RecordMetadata]:
        try:
            return self._commit_steps(records, offsets, group)
        finally:
            self._end_step()

    def _commit_steps(self, records: Sequence[StagedRecord], offsets: Optional[Mapping[SourceTP, int]],
                      group: Optional[bytes]) -> list[RecordMetadata]:
        producer = self._producer
        try:
            self._begin_step("begin_transaction")
            producer.begin_transaction()
            metrics.transactions_begun.inc()
            # a record that failed fails the commit: only those whose offsets are read are reported
            delivered = produce_all(producer, records, self._timeout_s, self._begin_step, self._known_topics,
                                    deadline=self._step_started + self._deliveries_within_s,
                                    on_progress=self._step_progressed, report_every_record=False)
            if offsets:
                positions = [TopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
                self._begin_step("send_offsets_to_transaction")
                producer.send_offsets_to_transaction(positions, group, self._timeout_s)
            self._commit_transaction()
            metrics.transactions_committed.inc()
        except KafkaException as exc:
            self._fail(exc)
        return delivered

    def _commit_transaction(self) -> None:
        self._begin_step("commit_transaction")
        try:
            self._producer.commit_transaction(self._timeout_s)
            return
        except KafkaException as exc:
            if not _commit_goes_on(exc.args[0]):
                raise
        # The commit goes on in the background and may still succeed: librdkafka
        # no longer lets it be aborted, only resumed.
        self._begin_step("commit_transaction (resumed)")
        try:
            self._producer.commit_transaction(self._timeout_s)
        except KafkaException as exc:
            if not _commit_goes_on(exc.args[0]):
                raise
            raise TransactionStuck(
                f"{self.transactional_id}: commit_transaction timed out twice, outcome unknown: {exc.args[0].str()}"
            ) from exc

    def _fail(self, exc: KafkaException) -> None:
        error: KafkaError = exc.args[0]
        if _fenced(error):
            raise ProducerFenced(f"{self.transactional_id}: {error.str()}") from exc
        self._begin_step("abort_transaction")
        with self._failing_as("abort"):
            self._producer.abort_transaction(self._timeout_s)
        metrics.transactions_aborted.inc()
        raise TransactionFailed(f"{self.transactional_id}: {error.str()} (aborted)") from exc

    @contextmanager
    def _failing_as(self, what: str) -> Iterator[None]:
        """A failed call inside: :class:`ProducerFenced` if it left the producer unusable, else
        :class:`TransactionFailed` (``what`` failed)."""
        try:
            yield
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if _fenced(error):
                raise ProducerFenced(f"{self.transactional_id}: {error.str()}") from exc
            raise TransactionFailed(f"{self.transactional_id}: {what} failed: {error.str()}") from exc

    def close(self) -> None:
        """Drop the producer; an open transaction is aborted by the next claim of the id, or times out.

        The producer is released on its own thread, after any call still
        running there: destroying it can block, and it must not block the loop.
        """
        self._thread.submit(release, self._producer)
        del self._producer
        self._thread.close()


def _fenced(error: KafkaError) -> bool:
    """Whether ``error`` leaves the producer unusable: fenced by a new owner of its id, or fatal."""
    return error.code() in FENCED_CODES or error.fatal()


def _commit_goes_on(error: KafkaError) -> bool:
    """Whether a failed commit_transaction is still running in the background (a timeout)."""
    return error.retriable() and not error.txn_requires_abort() and not error.fatal()
