"""TransactionalProducer against a fake librdkafka producer: each failure of each commit step.

For each, what became visible, which exception the caller gets
(TransactionFailed, ProducerFenced or TransactionStuck: in each case the
caller gives the round's partitions up), whether the transaction was aborted, and what
the metrics counted.
"""
from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from fakes import FakeProducer, error
from prometheus_client import REGISTRY

from faust_eos.committing import transaction as transaction_module
from faust_eos.committing.transaction import (
    ProducerFenced,
    TransactionalProducer,
    TransactionFailed,
    TransactionStuck,
    group_metadata,
    worker_transactional_id,
)
from faust_eos.metrics import TRANSACTION_STEPS
from faust_eos.state.staging import SourceTP, StagedRecord

SOURCE = SourceTP("payments", 3)
GROUP = b"the committing member"  # passed through untouched
COUNTERS = {
    "begun": "faust_eos_transactions_begun_total",
    "committed": "faust_eos_transactions_committed_total",
    "aborted": "faust_eos_transactions_aborted_total",
}


def staged(*values: bytes) -> list[StagedRecord]:
    return [
        StagedRecord(topic="out", key=b"k", value=value, partition=None, timestamp_ms=None, headers=None,
                     source_offset=offset)
        for offset, value in enumerate(values)
    ]


def counts() -> dict[str, float]:
    return {name: REGISTRY.get_sample_value(series) or 0.0 for name, series in COUNTERS.items()}


class Scenario:
    """One transaction over a fake producer, and the counters it moved."""

    def __init__(self, call_timeout_s: float = 5.0, deadline_grace_s: float = 5.0, **producer_config: Any) -> None:
        self.producers: list[FakeProducer] = []
        self.transaction = TransactionalProducer(
            transactional_id=worker_transactional_id("app", "w1"),
            producer_config={"bootstrap.servers": "nowhere:9092", **producer_config},
            call_timeout_s=call_timeout_s, producer_factory=self._producer, deadline_grace_s=deadline_grace_s,
        )
        self.producer = self.producers[0]
        self._before = counts()

    def _producer(self, config: dict) -> FakeProducer:
        producer = FakeProducer(config)
        self.producers.append(producer)
        return producer

    def commit(self, records: list[StagedRecord], offset: int = 10) -> list:
        return asyncio.run(self.transaction.commit(records, {SOURCE: offset}, GROUP))

    def counted(self) -> dict[str, float]:
        now = counts()
        return {name: now[name] - self._before[name] for name in COUNTERS}


@pytest.fixture
def scenario():
    created: list[Scenario] = []

    def make(**kwargs) -> Scenario:
        created.append(Scenario(**kwargs))
        return created[-1]

    yield make
    for each in created:
        for event in each.producer.blocked.values():
            event.set()
        each.transaction.close()


def test_the_producer_gets_the_workers_transactional_id(scenario):
    run = scenario()
    assert run.producer.config == {"bootstrap.servers": "nowhere:9092", "transactional.id": "app-worker-w1"}
    asyncio.run(run.transaction.init())
    assert run.producer.calls == ["init_transactions"]


def test_the_member_is_serialized_as_librdkafkas_own_consumer_serializes_it():
    consumer = Consumer({"group.id": "app", "bootstrap.servers": "nowhere:9092", "log_level": 0})
    try:
        assert group_metadata("app", -1, "") == consumer.consumer_group_metadata()
    finally:
        consumer.close()
    assert group_metadata("app", 7, "member-1") == b"CGMDv2:\x07\x00\x00\x00app\x00member-1\x00\x01"


def test_every_offset_of_the_round_is_sent_with_the_member(scenario):
    run = scenario()
    asyncio.run(run.transaction.commit(staged(b"a"), {SOURCE: 10, SourceTP("other", 0): 4}, GROUP))
    assert run.producer.offsets_sent == [([TopicPartition("payments", 3, 10), TopicPartition("other", 0, 4)], GROUP)]


def test_records_without_offsets_commit_without_sending_any(scenario):
    run = scenario()
    asyncio.run(run.transaction.commit(staged(b"a")))
    assert run.producer.offsets_sent == [] and run.producer.visible == [("out", b"a")]


def test_a_commit_makes_its_records_visible_with_its_offset(scenario):
    run = scenario()
    metadata = run.commit(staged(b"a", b"b"), offset=10)
    assert run.producer.visible == [("out", b"a"), ("out", b"b")]
    assert run.producer.offsets_sent == [([TopicPartition("payments", 3, 10)], GROUP)]
    assert [(md.topic, md.offset) for md in metadata] == [("out", 0), ("out", 1)]
    assert run.producer.calls == [
        "begin_transaction", "list_topics out", "produce", "produce", "flush", "send_offsets_to_transaction",
        "commit_transaction",
    ]
    assert run.counted() == {"begun": 1, "committed": 1, "aborted": 0}


def step_counts() -> dict[str, float]:
    return {step: REGISTRY.get_sample_value("faust_eos_transaction_step_seconds_count", {"step": step}) or 0.0
            for step in TRANSACTION_STEPS}


def steps_timed(before: dict[str, float]) -> dict[str, float]:
    return {step: count - before[step] for step, count in step_counts().items() if count != before[step]}


def test_each_step_of_a_claim_and_a_commit_is_timed_once_under_its_calls_name(scenario):
    run = scenario()
    before = step_counts()
    asyncio.run(run.transaction.init())
    run.commit(staged(b"a", b"b"))
    assert steps_timed(before) == {
        "init_transactions": 1, "begin_transaction": 1, "list_topics": 1, "produce": 1, "flush": 1,
        "send_offsets_to_transaction": 1, "commit_transaction": 1,
    }


def test_a_failed_step_is_timed_and_so_is_the_abort_after_it(scenario):
    run = scenario()
    run.producer.failures["send_offsets_to_transaction"] = [error(KafkaError._TIMED_OUT, retriable=True)]
    before = step_counts()
    with pytest.raises(TransactionFailed):
        run.commit(staged(b"a"))
    assert steps_timed(before) == {
        "begin_transaction": 1, "list_topics": 1, "produce": 1, "flush": 1, "send_offsets_to_transaction": 1,
        "abort_transaction": 1,
    }


def test_a_resumed_commit_is_timed_as_a_second_commit_step(scenario):
    run = scenario()
    run.producer.failures["commit_transaction"] = [error(KafkaError._TIMED_OUT, retriable=True)]
    before = step_counts()
    run.commit(staged(b"a"))
    assert steps_timed(before)["commit_transaction"] == 2


def unread(*values: bytes, topic: str = "out") -> list[StagedRecord]:
    """Output records whose metadata nobody reads (as a send whose future no one awaited)."""
    records = staged(*values)
    for record in records:
        record.topic, record.metadata_wanted = topic, False
    return records


def test_only_records_whose_offsets_are_read_and_each_changelog_partitions_last_write_are_reported(scenario):
    run = scenario()
    changelog = [StagedRecord(topic="t-changelog", key=k, value=b"v", partition=p, timestamp_ms=None, headers=None,
                              source_offset=1, metadata_wanted=False, write=object())
                 for k, p in ((b"a", 0), (b"b", 0), (b"c", 1))]
    records = [*unread(b"x", b"y"), *staged(b"read"), *changelog]
    metadata = run.commit(records, offset=10)
    # each report costs the producer's thread a turn of the GIL: the others are read as not asked for
    assert [md.offset for md in metadata] == [-1, -1, 2, -1, 4, 5]
    assert [(md.topic, md.partition) for md in metadata[:2]] == [("out", -1), ("out", -1)]
    assert run.producer.visible == [(r.topic, r.value) for r in records]


def test_an_unreported_record_that_failed_fails_the_commit_and_the_transaction_is_aborted(scenario):
    run = scenario()
    run.producer.delivery_errors[1] = error(KafkaError.MSG_SIZE_TOO_LARGE)
    with pytest.raises(TransactionFailed, match="aborted"):
        run.commit(unread(b"a", b"b"))
    assert run.producer.visible == [] and "abort_transaction" in run.producer.calls
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 1}


def test_a_producer_learns_each_topic_once_before_its_first_record_to_it(scenario):
    # librdkafka would otherwise hold that record about a second, until its periodic topic scan
    run = scenario()
    run.commit(staged(b"a"))
    del run.producer.calls[:]
    dead_letter = StagedRecord(topic="dead-letters", key=b"k", value=b"c", partition=None, timestamp_ms=None,
                               headers=None, source_offset=1)
    run.commit([*staged(b"b"), dead_letter], offset=12)
    assert run.producer.calls == [
        "begin_transaction", "list_topics dead-letters", "produce", "produce", "flush", "send_offsets_to_transaction",
        "commit_transaction",
    ]
    assert run.producer.visible == [("out", b"a"), ("out", b"b"), ("dead-letters", b"c")]


def test_a_topic_whose_metadata_answer_carries_an_error_is_asked_about_again_at_the_next_commit(scenario):
    run = scenario()
    run.producer.topic_errors["out"] = error(KafkaError.LEADER_NOT_AVAILABLE)  # e.g. a topic just created
    run.commit(staged(b"a"))
    del run.producer.topic_errors["out"]
    run.commit(staged(b"b"))
    run.commit(staged(b"c"))
    assert run.producer.calls.count("list_topics out") == 2
    assert run.producer.visible == [("out", b"a"), ("out", b"b"), ("out", b"c")]


def test_a_topic_whose_metadata_cannot_be_fetched_aborts_before_anything_is_produced(scenario):
    run = scenario()
    run.producer.failures["list_topics out"] = [error(KafkaError._TIMED_OUT)]
    with pytest.raises(TransactionFailed, match="aborted"):
        run.commit(staged(b"a"))
    assert "produce" not in run.producer.calls and run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 1}


def test_a_full_produce_queue_that_drains_is_waited_out(scenario):
    run = scenario()
    run.producer.full_for_polls = 2
    run.commit(staged(b"a"))
    assert run.producer.calls.count("poll") == 2
    assert run.producer.visible == [("out", b"a")]
    assert run.counted() == {"begun": 1, "committed": 1, "aborted": 0}


def test_a_produce_queue_that_never_drains_fails_the_transaction_after_one_call_timeout(scenario):
    run = scenario(call_timeout_s=0.001)
    run.producer.full_for_polls = None
    with pytest.raises(TransactionFailed, match="queue still full"):
        run.commit(staged(b"a"))
    assert "abort_transaction" in run.producer.calls
    assert "commit_transaction" not in run.producer.calls
    assert run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 1}


def test_a_delivery_error_aborts_before_the_offsets_are_sent(scenario):
    run = scenario()
    run.producer.delivery_errors[1] = error(KafkaError.MSG_SIZE_TOO_LARGE)
    with pytest.raises(TransactionFailed, match="aborted"):
        run.commit(staged(b"a", b"b"))
    assert run.producer.calls[-2:] == ["flush", "abort_transaction"]
    assert run.producer.offsets_sent == [] and run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 1}


def test_a_fence_reported_in_a_delivery_callback_gives_the_partition_up_without_abort(scenario):
    run = scenario()
    run.producer.delivery_errors[0] = error(KafkaError._FENCED, fatal=True)
    with pytest.raises(ProducerFenced):
        run.commit(staged(b"a"))
    assert "abort_transaction" not in run.producer.calls
    assert run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 0}


def test_records_still_undelivered_once_none_is_acknowledged_for_a_call_timeout_abort_the_transaction(scenario):
    run = scenario(call_timeout_s=0.2)
    run.producer.in_flight = {0}
    # the line names where the delivered ones landed: they are aborted with the rest
    with pytest.raises(TransactionFailed, match=r"1 records undelivered: none acknowledged for 0.2 s "
                                                r"\(delivered: out\[0\]@1-1\)"):
        run.commit(staged(b"a", b"b"))
    assert run.producer.calls[-2:] == ["flush", "abort_transaction"]
    assert run.producer.offsets_sent == [] and run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 1}


@pytest.mark.parametrize(
    "fence",
    [error(KafkaError.PRODUCER_FENCED), error(KafkaError._FENCED, fatal=True), error(KafkaError._FATAL, fatal=True)],
    ids=["PRODUCER_FENCED", "_FENCED", "fatal"],
)
def test_a_fence_at_send_offsets_gives_the_partition_up_without_abort(scenario, fence):
    run = scenario()
    run.producer.failures["send_offsets_to_transaction"] = [fence]
    with pytest.raises(ProducerFenced):
        run.commit(staged(b"a"))
    assert run.producer.calls[-1] == "send_offsets_to_transaction"
    assert run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 0}


@pytest.mark.parametrize(
    "step, failure",
    [
        ("send_offsets_to_transaction", error(KafkaError._TIMED_OUT, retriable=True)),
        ("commit_transaction", error(KafkaError._INCONSISTENT, txn_requires_abort=True)),
    ],
    ids=["send_offsets timing out", "commit refused as abortable"],
)
def test_a_step_failing_short_of_a_fence_aborts_the_transaction(scenario, step, failure):
    run = scenario()
    run.producer.failures[step] = [failure]
    with pytest.raises(TransactionFailed, match="aborted"):
        run.commit(staged(b"a"))
    assert run.producer.calls[-2:] == [step, "abort_transaction"]
    assert run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 1}


def test_a_commit_that_times_out_is_resumed_not_aborted(scenario):
    run = scenario()
    run.producer.failures["commit_transaction"] = [error(KafkaError._TIMED_OUT, retriable=True)]
    metadata = run.commit(staged(b"a"))
    assert run.producer.calls[-2:] == ["commit_transaction", "commit_transaction"]
    assert "abort_transaction" not in run.producer.calls
    assert run.producer.visible == [("out", b"a")] and len(metadata) == 1
    assert run.counted() == {"begun": 1, "committed": 1, "aborted": 0}


def test_a_commit_that_times_out_twice_has_an_unknown_outcome(scenario):
    run = scenario()
    timeout = error(KafkaError._TIMED_OUT, retriable=True)
    run.producer.failures["commit_transaction"] = [timeout, timeout]
    with pytest.raises(TransactionStuck, match="outcome unknown"):
        run.commit(staged(b"a"))
    assert "abort_transaction" not in run.producer.calls
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 0}


def test_deliveries_that_keep_coming_are_waited_for_past_the_call_timeout(scenario):
    # a busy worker's large commit: its reports come slowly, but they come
    run = scenario(call_timeout_s=0.2, deadline_grace_s=0.3)
    values = [bytes([value]) for value in range(8)]
    run.producer.in_flight = set(range(8))
    run.producer.lands_per_flush = 1
    started = time.monotonic()
    run.commit(staged(*values))
    assert time.monotonic() - started > 2 * (0.2 + 0.3), "the wait outlasted a step's deadline twice"
    assert run.producer.visible == [("out", value) for value in values]
    assert run.counted() == {"begun": 1, "committed": 1, "aborted": 0}


def test_the_wait_for_deliveries_ends_within_the_transaction_timeout_even_while_they_come(scenario):
    # 70% of a 1 s transaction timeout: the rest is left to send the offsets and commit
    run = scenario(call_timeout_s=0.2, deadline_grace_s=0.3, **{"transaction.timeout.ms": 1000})
    run.producer.in_flight = set(range(100))
    run.producer.lands_per_flush = 1
    with pytest.raises(TransactionFailed, match="records undelivered at the end of the time the transaction has"):
        run.commit(staged(*[b"v"] * 100))
    assert run.producer.visible == [] and run.producer.calls[-1] == "abort_transaction"


def test_an_abort_that_is_fenced_gives_the_partition_up(scenario):
    run = scenario(call_timeout_s=0.2)
    run.producer.in_flight = {0}
    run.producer.failures["abort_transaction"] = [error(KafkaError.PRODUCER_FENCED)]
    with pytest.raises(ProducerFenced):
        run.commit(staged(b"a"))
    assert run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 0}


def test_an_abort_that_fails_otherwise_is_a_failed_transaction(scenario):
    run = scenario(call_timeout_s=0.2)
    run.producer.in_flight = {0}
    run.producer.failures["abort_transaction"] = [error(KafkaError._TIMED_OUT, retriable=True)]
    with pytest.raises(TransactionFailed, match="abort failed"):
        run.commit(staged(b"a"))
    assert run.producer.visible == []
    assert run.counted() == {"begun": 1, "committed": 0, "aborted": 0}


def test_a_call_blocked_past_its_deadline_is_stuck_while_the_loop_goes_on(scenario):
    run = scenario(call_timeout_s=0.2, deadline_grace_s=0)
    release = run.producer.blocked["send_offsets_to_transaction"] = threading.Event()

    async def commit_while_blocked() -> None:
        with pytest.raises(TransactionStuck, match="commit stuck in send_offsets_to_transaction"):
            await run.transaction.commit(staged(b"a"), {SOURCE: 10}, GROUP)

    asyncio.run(commit_while_blocked())
    # the caller had its answer while the producer's call could not return
    assert not release.is_set() and run.producer.visible == []


def test_an_init_blocked_past_its_deadline_is_stuck(scenario):
    run = scenario(call_timeout_s=0.2, deadline_grace_s=0)
    run.producer.blocked["init_transactions"] = threading.Event()
    with pytest.raises(TransactionStuck, match="init_transactions stuck in init_transactions"):
        asyncio.run(run.transaction.init())


def test_a_commit_whose_steps_each_keep_their_deadline_is_not_stuck_however_long_it_takes(scenario, monkeypatch):
    run = scenario(call_timeout_s=1.0, deadline_grace_s=0)
    clock = [1000.0]
    monkeypatch.setattr(transaction_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    step = run.producer._call

    def slow_step(name: str) -> None:  # each step takes most of its deadline, on the transaction's clock
        clock[0] += 0.9
        step(name)

    monkeypatch.setattr(run.producer, "_call", slow_step)
    run.commit(staged(b"a", b"b"))
    assert clock[0] - 1000.0 > 3 * 1.0, "the steps together took several deadlines"
    assert run.producer.visible == [("out", b"a"), ("out", b"b")]


def test_a_failed_transaction_never_claims_the_id_again(scenario):
    # librdkafka may reuse a failed transaction's sequence numbers on the same producer: the next
    # assignment claims the id again, on a new one.
    run = scenario(call_timeout_s=0.2)
    run.producer.in_flight = {0}
    with pytest.raises(TransactionFailed):
        run.commit(staged(b"a"))
    assert len(run.producers) == 1 and "init_transactions" not in run.producer.calls
    assert run.producer.calls[-1] == "abort_transaction"


