"""The one interface of the two guarantees, and the one of the consumer they commit for.

A worker chooses its guarantee once, from Faust's ``processing_guarantee``
(:meth:`faust_eos.consuming.consumer.Consumer.guarantee`): exactly-once
(:class:`faust_eos.committing.exactly_once.TransactionManager`) or at-least-once
(:class:`faust_eos.committing.at_least_once.AtLeastOnce`). Both stage an event's
records with its input partition and offset, hold its table writes until they
commit, and answer how far the worker may commit and resume; they differ in how
a commit writes them. The consumer calls its guarantee; the guarantee calls the
consumer only through :class:`ConsumerCalls`, which the consumer is handed in as.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Protocol, Set

from faust.types import TP
from faust.types.tuples import FutureMessage, RecordMetadata

from faust_eos.state.staging import OutputStager
from faust_eos.state.table_state import TableState


class ConsumerCalls(Protocol):
    """What the commit side asks of the consumer it commits for."""

    def commit_early(self) -> None:
        """Start a commit before the interval ends: the records waiting for their commit reached the limit."""

    def count_committed(self, partitions: int) -> None:
        """Count input partitions whose offsets committed."""

    async def commit_offsets_to_group(self, offsets: Mapping[TP, int]) -> bool:
        """Commit ``offsets`` to the consumer group outside any transaction; True if the group accepted them."""

    def request_rejoin(self) -> None:
        """Make the group rebalance soon."""

    def group_membership(self) -> tuple[int, str]:
        """This worker's generation and member id in the group (-1 and "" while it is not a member)."""

    def sensors_read_records(self) -> bool:
        """Whether a sensor of the app reads the records sent by the event being processed."""

    def assignment(self) -> Set[TP]:
        """The partitions assigned to this worker."""

    def topic_partitions(self, topic: str) -> Optional[int]:
        """How many partitions ``topic`` has, if known."""

    async def seek_to_beginning(self, *partitions: TP) -> None:
        """Read ``partitions`` again from their first record."""


class Guarantee(Protocol):
    """Where the records of a worker's events wait, and how they commit."""

    #: the app's tables' writes, held until they commit
    tables: TableState

    def accepts_sends(self) -> bool:
        """Whether a record an agent sends now is staged here (else it takes Faust's own path)."""

    def output_stager(self, topic: str) -> OutputStager:
        """What stages the output records events send to ``topic``; a table's changelog is refused."""

    async def send(self, topic: str, key: Optional[bytes], value: Optional[bytes], partition: Optional[int],
                   timestamp: Optional[float], headers: Any) -> Awaitable[RecordMetadata]:
        """Stage one record; what it returns resolves once the record commits."""

    def stage_future_message(self, fut: FutureMessage) -> None:
        """Stage a record of ``Topic.send_soon`` (a table's changelog write)."""

    def uncommitted(self) -> int:
        """How many records (outputs and table writes) wait for their commit."""

    async def commit(self, offsets: Mapping[TP, int]) -> bool:
        """Commit ``offsets`` (the next offset to read, per input partition) with their events' records; True if
        every one committed."""

    async def commit_outside_events(self, committable: Callable[[TP], Optional[int]]) -> None:
        """Once per commit round, commit what no input event caused (``committable``: how far an input partition
        may commit now)."""

    def owns(self, tp: TP) -> bool:
        """Whether input partition ``tp`` is this worker's to hand out and commit."""

    async def committed_offsets(self, tps: Iterable[TP]) -> Mapping[TP, Optional[int]]:
        """The group's committed offsets of ``tps``, where handing out resumes (None: never committed)."""

    async def refuse_lost_offsets(self, committed: Mapping[TP, Optional[int]], sources: Iterable[TP]) -> None:
        """Raise :class:`~faust_eos.errors.OffsetsLost` if resuming from ``committed`` would lose or repeat
        effects that already committed."""

    def drop(self, revoked: Iterable[TP]) -> None:
        """Forget what the events of revoked input partitions staged: nothing more of theirs commits here."""

    async def changelog_ends(self, tps: Iterable[TP]) -> Optional[Mapping[TP, int]]:
        """Where a table's restore from each changelog partition ends; None: where the consumer says it ends."""
