"""Restores: one fetched batch at a time (Faust's recovery sees each batch's last record, the store applies them
all), and a changelog start the broker cannot name yet.

A real eos-rocksdb store in a temporary directory and the consumer's condensing
of a fetch, no broker. Records are as aiokafka fetches them; the events are as
Faust's recovery hands them to the table.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Optional

import pytest
from faust.tables.recovery import RebalanceAgain
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust_contract_support import no_callback, record, worker_app
from prometheus_client import REGISTRY
from store_support import PARTITION, Table, event_loop_for_faust  # noqa: F401 (an autouse fixture)

from faust_eos.consuming.consumer import Consumer
from faust_eos.state.store import Store


def changelog_record(t: Table, offset: int, key: str, value: Optional[bytes]) -> Any:
    tp = TP(t.table.changelog_topic.get_topic_name(), PARTITION)
    fetched = record(offset, tp)
    fetched.key, fetched.value = t.store._encode_key(key), value
    return fetched


def as_event(fetched: Any) -> Any:
    """The record as Faust's recovery hands it to the table's ``apply_changelog_batch``."""
    return SimpleNamespace(message=SimpleNamespace(
        tp=TP(fetched.topic, fetched.partition), partition=fetched.partition, offset=fetched.offset,
        key=fetched.key, value=fetched.value))


def condense(t: Table, fetched: dict[TP, list]) -> dict[TP, list]:
    """What the consumer hands Faust of one fetch."""
    return Consumer._condensed(as_consumer(t.table.app), fetched)


def as_consumer(app: Any) -> Any:
    """The consumer's state that condensing a fetch reads, for ``app``."""
    return SimpleNamespace(app=app, _batch_restoring_stores=None, _records_per_batch=lambda topic: None)


def restored_count(t: Table, kind: str = "active") -> float:
    labels = {"table": t.table.name, "partition": str(PARTITION), "kind": kind}
    return REGISTRY.get_sample_value("faust_eos_changelog_records_restored_total", labels) or 0.0


def test_a_fetched_changelog_batch_reaches_recovery_as_its_last_record_and_is_applied_whole_in_order(tmp_path):
    t = Table(tmp_path)
    batch = [changelog_record(t, 5, "m1", b"1"), changelog_record(t, 6, "m2", b"2"),
             changelog_record(t, 8, "m1", b"3"), changelog_record(t, 9, "m2", None)]
    changelog, source = TP(batch[0].topic, PARTITION), TP("payments", PARTITION)
    inputs = [record(40, source)]
    assert condense(t, {changelog: batch, source: inputs}) == {changelog: [batch[-1]], source: inputs}
    before = restored_count(t)

    t.store.apply_changelog_batch([as_event(batch[-1])], None, None)

    assert t.on_disk("m1") == b"3" and t.on_disk("m2") is None
    assert t.table.persisted_offset(changelog) == 9
    assert restored_count(t) - before == 4


def test_a_batch_whose_last_record_recovery_never_applies_is_not_applied_and_is_forgotten_once_a_later_one_is(
    tmp_path,
):
    t = Table(tmp_path)
    dropped = [changelog_record(t, 1, "m1", b"1"), changelog_record(t, 2, "m1", b"2")]
    later = [changelog_record(t, 1, "m1", b"1"), changelog_record(t, 2, "m1", b"2"), changelog_record(t, 3, "m2", b"9")]
    tp = TP(dropped[0].topic, PARTITION)
    condense(t, {tp: dropped})  # a rebalance came: recovery dropped record 2, then read again from 1
    condense(t, {tp: later})

    t.store.apply_changelog_batch([as_event(later[-1])], None, None)

    assert t.on_disk("m1") == b"2" and t.on_disk("m2") == b"9"
    assert t.store._preceding[PARTITION] == {}


def test_standby_records_are_counted_as_standby(tmp_path):
    t = Table(tmp_path)
    tp = TP(t.table.changelog_topic.get_topic_name(), PARTITION)
    t.table.app.tables.recovery.standby_tps.add(tp)
    batch = [changelog_record(t, 1, "m1", b"1"), changelog_record(t, 2, "m1", b"2")]
    before = restored_count(t, "standby")
    condense(t, {tp: batch})
    t.store.apply_changelog_batch([as_event(batch[-1])], None, None)
    assert restored_count(t, "standby") - before == 2


def test_a_revoked_partition_forgets_the_records_waiting_for_their_batchs_last(tmp_path):
    t = Table(tmp_path)
    tp = TP(t.table.changelog_topic.get_topic_name(), PARTITION)
    condense(t, {tp: [changelog_record(t, 1, "m1", b"1"), changelog_record(t, 2, "m1", b"2")]})
    t.store.revoke_partitions(t.table, {tp})
    assert PARTITION not in t.store._preceding


def test_a_table_with_its_own_changelog_callback_sees_every_record(tmp_path):
    app = worker_app(store="eos-rocksdb://", tabledir=tmp_path)
    table = app.Table("watched", default=None, partitions=4, on_changelog_event=no_callback)
    store: Store = table.data
    assert store.restores_in_batches() is False
    assert table.recovery_buffer_size == 1000  # Faust's default, left alone
    tp = TP(table.changelog_topic.get_topic_name(), PARTITION)
    batch = [record(1, tp), record(2, tp)]
    assert Consumer._condensed(as_consumer(app), {tp: batch}) == {tp: batch}


def test_a_changelog_start_the_broker_does_not_know_yet_restores_again_after_a_rebalance(monkeypatch):
    consumer = worker_app().consumer
    known, unknown = TP("t-changelog", 0), TP("t-changelog", 1)
    answers = [{known: 4, unknown: -1}, {known: 4, unknown: 0}]

    async def earliest_offsets(self: Any, *partitions: TP) -> dict[TP, int]:
        return answers.pop(0)

    monkeypatch.setattr(faust_aiokafka.Consumer, "earliest_offsets", earliest_offsets)
    rejoins: list[bool] = []
    monkeypatch.setattr(consumer, "request_rejoin", lambda: rejoins.append(True))
    with pytest.raises(RebalanceAgain):
        asyncio.run(consumer.earliest_offsets(known, unknown))
    assert rejoins == [True]
    assert asyncio.run(consumer.earliest_offsets(known, unknown)) == {known: 4, unknown: 0}
    assert rejoins == [True]
