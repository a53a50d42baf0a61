"""A real eos-rocksdb store in a temporary directory, written through its table as an agent writes it.

The test stands in for faust-eos's producer, handing each changelog record to
the store as the transaction manager does.
"""
from __future__ import annotations

import asyncio
import contextlib
import weakref
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from faust.streams import _current_event

from faust_contract_support import worker_app
from faust_eos.staging import future_resolver, staged_record
from faust_eos.store import Store

PARTITION = 2


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
    """A table on the eos-rocksdb store whose changelog records are held as faust-eos holds them."""

    def __init__(self, tmp_path, *, hold: bool = True) -> None:
        app = worker_app(store="eos-rocksdb://", tabledir=tmp_path)
        self.table = app.Table("totals", default=None, partitions=4)
        self.store: Store = self.table.data
        self.records: list = []

        def send_soon(fut: Any) -> None:
            message = fut.message
            record = staged_record(message.channel.get_topic_name(), message.key, message.value, message.partition,
                                   message.timestamp, message.headers, 0, future_resolver(fut))
            self.records.append(record)
            if hold:
                self.store.hold(record)

        app.producer.send_soon = send_soon

    def commit(self, checkpoint: int) -> None:
        """The records so far committed, up to changelog offset ``checkpoint``."""
        self.store.commit(PARTITION, self.records, checkpoint)
        self.records = []

    def on_disk(self, key: str) -> Any:
        return self.store.partition_db(PARTITION).get(self.store._encode_key(key))
