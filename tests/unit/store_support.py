"""A real eos-rocksdb store in a temporary directory, written through its table as an agent writes it.

The test stands in for faust-eos's producer, handing each changelog record to
the tables as the transaction manager does, and commits them as a round does.
"""
from __future__ import annotations

import asyncio
import contextlib
import weakref
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from aiokafka.structs import RecordMetadata
from faust.streams import _current_event, current_event
from faust.types import TP
from faust_contract_support import worker_app

from faust_eos.state.staging import UNBOUND, SourceTP, future_resolver, staged_record
from faust_eos.state.store import Store
from faust_eos.state.table_state import TableState

PARTITION = 2
SOURCE = SourceTP("payments", PARTITION)


@pytest.fixture(autouse=True)
def event_loop_for_faust() -> Iterator[None]:
    """Faust's app and tables want a current event loop; earlier tests may have closed theirs."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    loop.close()


class Event:
    def __init__(self, partition: int, offset: int) -> None:
        self.message = SimpleNamespace(topic="payments", partition=partition, offset=offset)


@contextlib.contextmanager
def inside_event(offset: int, partition: int = PARTITION) -> Iterator[None]:
    """Run the block as an agent processing the input record at ``offset`` of ``partition``."""
    event = Event(partition, offset)
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


class Table:
    """A table on the eos-rocksdb store whose changelog records reach its tables as faust-eos hands them over."""

    def __init__(self, tmp_path, *, hold: bool = True) -> None:
        app = worker_app(store="eos-rocksdb://", tabledir=tmp_path)
        self.table = app.Table("totals", default=None, partitions=4)
        self.store: Store = self.table.data
        self.tables = TableState([self.table], one_source=True)

        def send_soon(fut: Any) -> None:
            message = fut.message
            event = current_event()
            record = staged_record(message.channel.get_topic_name(), message.key, message.value, message.partition,
                                   message.timestamp, message.headers,
                                   event.message.offset if event is not None else UNBOUND, future_resolver(fut))
            if hold:
                self.tables.hold(record, SOURCE)

        app.producer.send_soon = send_soon

    def commit(self, checkpoint: int, up_to: int = 2**62) -> None:
        """The writes of events below ``up_to`` commit, the last at changelog offset ``checkpoint``."""
        records = self.tables.changelog_records({SOURCE: up_to})
        topic = self.table.changelog_topic.get_topic_name()
        metadata = [RecordMetadata(topic, PARTITION, TP(topic, PARTITION), checkpoint - len(records) + 1 + i, 0, 0, -1)
                    for i in range(len(records))]
        self.tables.committed(records, metadata)

    def pending(self) -> list:
        """The changelog records a commit would carry now."""
        return self.tables.changelog_records({SOURCE: 2**62})

    def drop(self) -> None:
        """The writes not committed are dropped, as when their transaction is fenced."""
        self.tables.drop(SOURCE)

    def on_disk(self, key: str) -> Any:
        return self.store.partition_db(PARTITION).get(self.store._encode_key(key))
