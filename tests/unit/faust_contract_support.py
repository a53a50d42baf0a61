"""Shared doubles for the contract tests against the installed Faust (no broker, nothing started)."""
from __future__ import annotations

import asyncio
from typing import Any, Optional

import faust
from aiokafka.structs import ConsumerRecord
from faust.types import TP

from faust_eos.faust_internals import ConsumerHooks

ORDERS = TP("orders", 0)


def worker_app(processing_guarantee: str = "exactly_once", broker: str = "eos://localhost:9092",
               **settings: Any) -> faust.App:
    """An app on ``eos://`` (exactly_once unless told) as a worker sees it: ``in_worker`` set, never started."""
    app = faust.App("contract", broker=broker, processing_guarantee=processing_guarantee, **settings)
    app.in_worker = True
    return app


def record(offset: int, tp: TP = ORDERS) -> ConsumerRecord:
    """A record as aiokafka fetches it."""
    return ConsumerRecord(
        topic=tp.topic, partition=tp.partition, offset=offset, timestamp=0, timestamp_type=0,
        key=b"k", value=b"v", checksum=None, serialized_key_size=1, serialized_value_size=1, headers=[],
    )


def fetched_batch(tp: TP, *values: bytes, first_offset: int = 40) -> list[ConsumerRecord]:
    """A fetch's records of ``tp``, one per value, from ``first_offset`` on: keys ``m0``, ``m1``..., timestamps
    1,000 ms on, a header ``h`` each."""
    records = []
    for i, value in enumerate(values):
        r = record(first_offset + i, tp)
        r.key, r.value, r.timestamp, r.headers = f"m{i}".encode(), value, 1_000 + i, [("h", b"%d" % i)]
        records.append(r)
    return records


async def no_callback(*args: Any) -> None:
    """Stands in for the conductor's message callback and the rebalance callbacks."""


class RecordingConsumer(ConsumerHooks):
    """Faust's aiokafka consumer whose hooks record how Faust calls them.

    ``fetched`` is what ``fetch_batch`` returns; ``committable`` what
    ``committable_offsets`` returns; ``committed`` what ``seek_to_committed``
    returns. Nothing reaches a broker.
    """

    fetched: dict[TP, list] = {}
    committable: dict[TP, int] = {}
    committed: dict[TP, Optional[int]] = {}

    def __post_init__(self) -> None:
        super().__post_init__()
        self.calls: list[tuple] = []

    async def fetch_batch(self, active_partitions: Optional[set[TP]], timeout: float) -> dict[TP, list]:
        self.calls.append(("fetch_batch", set(active_partitions or ()), timeout))
        return self.fetched

    async def note_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        self.calls.append(("note_gap", tp, offset_from, offset_to))

    def committable_offsets(self, tps: Any) -> dict[TP, int]:
        tps = list(tps)
        self.calls.append(("committable_offsets", tps))
        return {tp: offset for tp, offset in self.committable.items() if tp in tps}

    async def seek_partition(self, tp: TP, offset: int) -> None:
        self.calls.append(("seek_partition", tp, offset))

    async def seek_to_committed(self) -> dict[TP, Optional[int]]:
        self.calls.append(("seek_to_committed",))
        return self.committed

    def highwater(self, tp: TP) -> int:
        return 100  # Faust's getmany reads it for its monitor only


def recording_consumer(app: faust.App, cls: type = RecordingConsumer, callback: Any = no_callback) -> Any:
    """A consumer of ``app`` built as its transport builds one, on the running loop."""
    return cls(
        app.transport,
        callback=callback,
        on_partitions_revoked=no_callback,
        on_partitions_assigned=no_callback,
        loop=asyncio.get_running_loop(),
    )


class RecordingTransactions:
    """Stands in for the transaction manager: records each call Faust makes, in ``log``."""

    def __init__(self, log: Optional[list] = None, commit_result: bool = True) -> None:
        self.log = log if log is not None else []
        self.commit_result = commit_result

    async def on_partitions_revoked(self, *args: Any, **kwargs: Any) -> None:
        self.log.append(("transactions.on_partitions_revoked", args, kwargs))

    async def on_rebalance(self, *args: Any, **kwargs: Any) -> None:
        self.log.append(("transactions.on_rebalance", args, kwargs))

    async def commit(self, *args: Any, **kwargs: Any) -> bool:
        self.log.append(("transactions.commit", args, kwargs))
        return self.commit_result

    async def send(self, *args: Any, **kwargs: Any) -> asyncio.Future:
        self.log.append(("transactions.send", args, kwargs))
        return asyncio.get_running_loop().create_future()
