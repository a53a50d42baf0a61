"""Tables under at-least-once: a table write reaches its changelog only with its event's commit, after the outputs."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from faust_eos.at_least_once import HeldChangelogs
from faust_eos.errors import OutputNotWritten
from faust_eos.staging import Source, SourceTP, staged_record

CHANGELOG = "app-counts-changelog"
PAYMENTS = TP("payments", 0)


class FakeProducer:
    """Acknowledges each send with its position in the order sent, or fails as told."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.sent: list[bytes] = []
        self.failure = failure

    async def send(self, topic, key, value, partition, timestamp, headers) -> Any:
        if self.failure is not None:
            raise self.failure
        self.sent.append(value)
        future = asyncio.get_running_loop().create_future()
        future.set_result(SimpleNamespace(offset=len(self.sent) - 1))
        return future


class FakeTables:
    changelog_topics = frozenset({CHANGELOG})

    def __init__(self) -> None:
        self.held: list[bytes] = []
        self.stored: list[tuple[bytes, int]] = []
        self.released: list[bytes] = []

    def hold(self, record) -> None:
        self.held.append(record.value)

    def committed(self, records, metadata) -> None:
        self.stored += [(r.value, md.offset) for r, md in zip(records, metadata)]

    def dropped(self, records) -> None:
        self.released += [r.value for r in records]


def held(producer: FakeProducer) -> tuple[HeldChangelogs, FakeTables]:
    tables = FakeTables()
    changelogs = HeldChangelogs(tables, producer)
    for offset, key, value in [(1, b"k", b"k=1"), (2, b"j", b"j=1"), (3, b"k", b"k=2"), (7, b"k", b"k=3")]:
        record = staged_record(CHANGELOG, key, value, 0, None, None, offset)
        changelogs.staging.add(Source(PAYMENTS.topic, PAYMENTS.partition, offset), record)
    return changelogs, tables


def test_a_commit_sends_the_last_write_per_key_of_the_events_it_commits_then_stores_them():
    producer = FakeProducer()
    changelogs, tables = held(producer)
    asyncio.run(changelogs.write_up_to({PAYMENTS: 4}))
    assert producer.sent == [b"j=1", b"k=2"]
    assert tables.stored == [(b"j=1", 0), (b"k=2", 1)]
    assert [r.value for r in changelogs.staging.take(SourceTP("payments", 0), 100)] == [b"k=3"]


def test_a_changelog_that_cannot_be_written_keeps_the_writes_held_for_the_next_commit():
    producer = FakeProducer(failure=OSError("broker away"))
    changelogs, tables = held(producer)
    with pytest.raises(OSError):
        asyncio.run(changelogs.write_up_to({PAYMENTS: 4}))
    assert tables.stored == [] and len(changelogs.staging) == 4
    producer.failure = None
    asyncio.run(changelogs.write_up_to({PAYMENTS: 4}))
    assert tables.stored == [(b"j=1", 0), (b"k=2", 1)]


def test_revoked_partitions_release_their_held_writes():
    changelogs, tables = held(FakeProducer())
    changelogs.drop({PAYMENTS})
    assert sorted(tables.released) == [b"j=1", b"k=1", b"k=2", b"k=3"] and len(changelogs.staging) == 0


def test_after_an_output_failed_no_commit_goes_through():
    producer = FakeProducer()
    changelogs, tables = held(producer)
    changelogs.output_failed(OSError("record too large"))
    with pytest.raises(OutputNotWritten, match="record too large"):
        asyncio.run(changelogs.write_up_to({PAYMENTS: 4}))
    assert producer.sent == [] and tables.stored == []
