"""Which table writes exactly-once can commit: each table partition is written from one input partition."""
from __future__ import annotations

import asyncio
import contextlib
import weakref
from types import SimpleNamespace
from typing import Iterator

import faust
import pytest
from faust.streams import _current_event

from faust_contract_support import worker_app
from faust_eos import StoreRefused
from faust_eos.table_state import TableState

CHANGELOG = "contract-counts-changelog"


class Event:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.message = SimpleNamespace(topic=topic, partition=partition, offset=offset)


@contextlib.contextmanager
def inside_event(topic: str, partition: int, offset: int) -> Iterator[None]:
    event = Event(topic, partition, offset)
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


def test_a_table_partition_written_from_a_second_input_partition_is_refused():
    async def scenario() -> None:
        manager = worker_app().consumer.transactions
        manager._changelog_topics = frozenset({CHANGELOG})
        held = []
        manager.tables.hold = held.append

        def write(topic: str, offset: int) -> None:
            with inside_event(topic, 0, offset):
                manager.stage(CHANGELOG, b"k", b"v", 0, None, None, lambda md: None)

        write("orders", 1)
        write("orders", 2)  # the same input partition again: fine
        with pytest.raises(StoreRefused, match=r"contract-counts-changelog\[0\] is written by events of orders\[0\] "
                                               r"and of refunds\[0\]"):
            write("refunds", 3)
        assert len(held) == 2

    asyncio.run(scenario())


@pytest.mark.parametrize("options", [{"use_partitioner": True}], ids=["use_partitioner"])
def test_a_table_that_writes_other_partitions_than_its_events_is_refused(tmp_path, options):
    app = faust.App("x", broker="eos://localhost:9092", datadir=str(tmp_path), store="eos-rocksdb://")
    app.Table("routed", default=int, **options)
    with pytest.raises(StoreRefused, match="table 'routed' writes keys to partitions other than its event's"):
        TableState(app.tables.values())
