"""Contract of Faust's app, sends, rebalances, streams and recovery, as faust-eos relies on them.

Each test drives the installed Faust with fakes (no broker, nothing started).
See test_faust_contract.py for the consumer, test_faust_contract_store.py for
tables' storage.
"""
from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace
from typing import Any

import faust.tables.recovery
import pytest
from aiokafka.structs import TopicPartition
from faust.streams import current_event
from faust.transport.drivers.aiokafka import ConsumerRebalanceListener
from faust.types import TP
from faust_contract_support import ORDERS, RecordingTransactions, no_callback, worker_app

from faust_eos import Topic as EosTopic
from faust_eos import faust_internals
from faust_eos.transport import TransactionManager

OTHER_ORDERS = TP("orders", 1)
THIRD_ORDERS = TP("orders", 2)
CHANGELOG = TP("contract-counts-changelog", 0)


class FakeConsumer:
    """What the app asks of its consumer during a rebalance; every call lands in ``log``."""

    def __init__(self, assignment: set[TP], log: list) -> None:
        self._assignment = assignment
        self.log = log
        self.transactions = RecordingTransactions(log)

    def assignment(self) -> set[TP]:
        return set(self._assignment)

    def stop_flow(self) -> None:
        self.log.append(("consumer.stop_flow",))

    def pause_partitions(self, tps: Any) -> None:
        self.log.append(("consumer.pause_partitions", set(tps)))

    async def wait_empty(self) -> None:
        self.log.append(("consumer.wait_empty",))


def app_with_fake_consumer(assignment: set[TP]) -> tuple[Any, list, list]:
    """A worker app whose consumer is a fake; returns it, the call log, and what it crashed with."""
    app = worker_app()
    log: list = []
    crashes: list = []

    async def crash(exc: BaseException) -> None:  # Faust reports a failed rebalance step here
        crashes.append(exc)

    app.crash = crash
    app.consumer = FakeConsumer(assignment, log)
    return app, log, crashes


# -- sends -----------------------------------------------------------------------
def test_under_exactly_once_in_a_worker_faust_sends_through_the_consumers_transaction_manager():
    async def scenario() -> None:
        app = worker_app()
        assert app.in_transaction
        assert await app.maybe_start_producer() is app.consumer.transactions
        assert isinstance(app.consumer.transactions, TransactionManager)

    asyncio.run(scenario())


def test_topic_send_calls_the_transaction_managers_send_with_arguments_its_signature_accepts():
    async def scenario() -> None:
        app, log, _ = app_with_fake_consumer(set())
        await app.topic("totals").send(key=b"k", value=b"v", partition=2, headers={"h": b"1"})
        [(name, args, kwargs)] = log
        assert name == "transactions.send"
        bound = inspect.signature(TransactionManager.send).bind(None, *args, **kwargs).arguments
        assert (bound["topic"], bound["key"], bound["value"], bound["partition"]) == ("totals", b"k", b"v", 2)
        assert bound["timestamp"] is None and bound["headers"] == {"h": b"1"}

    asyncio.run(scenario())


def test_a_table_changelog_write_goes_to_producer_send_soon_with_its_partition_already_chosen():
    async def scenario() -> None:
        app = worker_app()
        table = app.Table("counts", default=int)
        buffered: list = []
        app.producer.send_soon = buffered.append
        app.producer.key_partition = lambda topic, key: TP(topic, 3)  # eager partitioning asks this
        future = table.send_changelog(None, "k", 1)
        tombstone = table.send_changelog(1, "k", None, value_serializer="raw")
        assert buffered == [future, tombstone]
        message = future.message
        assert message.channel.get_topic_name() == CHANGELOG.topic
        assert (message.partition, message.key, message.value) == (3, b'"k"', b"1")
        assert (message.timestamp, message.headers, message.callback) == (None, {}, table._on_changelog_sent)
        assert (tombstone.message.partition, tombstone.message.value) == (1, None)

    asyncio.run(scenario())


def test_a_topic_send_gets_its_producer_from_get_producer():
    class Topic(faust_internals.TopicHooks):
        async def producer_for_sends(self) -> Any:
            asked.append(self.get_topic_name())
            return RecordingTransactions(log)

    async def scenario() -> None:
        app = worker_app(Topic=Topic)
        await app.topic("totals").send(key=b"k", value=b"v")

    asked: list = []
    log: list = []
    asyncio.run(scenario())
    assert asked == ["totals"] and [name for name, *_ in log] == ["transactions.send"]


def test_faust_eos_topics_send_to_the_started_transaction_manager_without_the_apps_start_guard():
    async def scenario() -> None:
        app = worker_app(Topic=EosTopic)
        topic = app.topic("totals")
        guarded: list = []

        async def start_guard() -> Any:
            guarded.append(True)
            return app.consumer.transactions

        app.maybe_start_producer = start_guard
        assert await topic.producer_for_sends() is app.consumer.transactions
        assert guarded == [True]  # not started yet: Faust's own path, which starts it
        await app.consumer.transactions.start()
        try:
            assert await topic.producer_for_sends() is app.consumer.transactions
            assert guarded == [True]
        finally:
            await app.consumer.transactions.stop()

    asyncio.run(scenario())


# -- rebalances ------------------------------------------------------------------
def test_on_revocation_faust_tells_the_transactions_once_the_streams_are_empty_and_flow_control_is_off():
    async def scenario() -> None:
        app, log, crashes = app_with_fake_consumer({ORDERS})
        app.flow_control.resume()
        await app._on_partitions_revoked({ORDERS})
        assert crashes == []
        assert log == [
            ("consumer.stop_flow",),
            ("consumer.pause_partitions", {ORDERS}),
            ("consumer.wait_empty",),
            ("transactions.on_partitions_revoked", ({ORDERS},), {}),
        ]
        assert not app.flow_control.is_active()

    asyncio.run(scenario())


def test_on_assignment_faust_tells_the_transactions_what_is_assigned_revoked_and_new_before_the_tables():
    async def scenario() -> None:
        app, log, crashes = app_with_fake_consumer(set())

        async def tables_on_rebalance(*args: Any) -> None:
            log.append(("tables.on_rebalance", args, {}))

        app.tables.on_rebalance = tables_on_rebalance
        await app._on_partitions_assigned({ORDERS, OTHER_ORDERS}, 1)
        log.clear()
        await app._on_partitions_assigned({OTHER_ORDERS, THIRD_ORDERS}, 2)
        assert crashes == []
        transactions = [entry for entry in log if entry[0].startswith(("transactions", "tables"))]
        assert transactions == [
            ("transactions.on_rebalance", ({OTHER_ORDERS, THIRD_ORDERS}, {ORDERS}, {THIRD_ORDERS}), {}),
            ("tables.on_rebalance", ({OTHER_ORDERS, THIRD_ORDERS}, {ORDERS}, {THIRD_ORDERS}, 2), {}),
        ]

    asyncio.run(scenario())


def test_rebalancing_is_set_from_rebalance_start_to_rebalance_end():
    app = worker_app()
    assert app.rebalancing is False
    app.on_rebalance_start()
    assert app.rebalancing is True
    app.on_rebalance_end()
    assert app.rebalancing is False


def test_flow_control_is_active_from_resume_until_suspend():
    app = worker_app()
    app.flow_control.resume()
    assert app.flow_control.is_active() is True
    app.flow_control.suspend()
    assert app.flow_control.is_active() is False


def test_the_rebalance_listener_sets_the_consumer_generation_id_from_the_coordinator_before_assigning():
    async def scenario() -> None:
        app = worker_app()
        assigned: list = []

        async def on_partitions_assigned(tps: set[TP], generation: int) -> None:
            assigned.append((tps, generation, app.consumer_generation_id))

        aiokafka_consumer = SimpleNamespace(_coordinator=SimpleNamespace(generation=7))
        thread = SimpleNamespace(
            app=app, _ensure_consumer=lambda: aiokafka_consumer, on_partitions_assigned=on_partitions_assigned
        )
        await ConsumerRebalanceListener(thread).on_partitions_assigned([TopicPartition("orders", 1)])
        assert assigned == [({OTHER_ORDERS}, 7, 7)]

    asyncio.run(scenario())


# -- streams -----------------------------------------------------------------------
class TimerDone(Exception):
    """Ends a Faust timer, which otherwise runs for ever."""


def test_current_event_is_the_event_inside_an_agent_and_none_in_a_timer_running_meanwhile():
    async def scenario() -> None:
        app = worker_app()
        inside, release = asyncio.Event(), asyncio.Event()
        seen: dict[str, Any] = {}

        @app.agent(app.topic("orders", value_type=str))
        async def agent(stream: Any) -> None:
            async for _ in stream:
                inside.set()
                await release.wait()  # the timer runs while this event is being processed
                seen["agent"] = current_event()

        async def tick() -> None:
            await inside.wait()
            seen["timer"] = current_event()
            release.set()
            raise TimerDone

        timer = app.timer(0.001)(tick)  # what Faust runs as the timer's task
        async with agent.test_context() as running:
            put = asyncio.ensure_future(running.put("hello"))
            with pytest.raises(TimerDone):
                await timer()
            event = await put
        assert seen["timer"] is None
        assert seen["agent"] is event and event.value == "hello"

    asyncio.run(scenario())


# -- streams ---------------------------------------------------------------------
class Handle:
    """Something an event's weak reference can point at."""


def test_a_stream_s_processors_are_its_own_list_and_once_iterated_it_is_not_chained_again():
    app = worker_app()
    stream = app.stream(app.topic("orders"))

    def double(value: Any) -> Any:
        return value * 2

    stream.add_processor(double)
    assert faust_internals.StreamHooks.processors.fget(stream) == [double]

    async def values() -> Any:
        yield 1

    assert stream.group_by(double, name="by-double") is not stream
    iterated = app.stream(app.topic("orders"))
    faust_internals.StreamHooks.begin_iterating(iterated, values())
    # an agent restarted on the same stream iterates it again: its group_by was made the first time
    assert iterated.group_by(double, name="by-double") is iterated


def test_a_stream_closes_the_iterators_it_was_told_of_when_it_stops():
    async def scenario() -> None:
        app = worker_app()
        stream = app.stream(app.topic("orders"))
        closed = []

        async def values() -> Any:
            try:
                yield 1
                yield 2
            finally:
                closed.append(True)

        iterator = values()
        faust_internals.StreamHooks.begin_iterating(stream, iterator)
        assert await iterator.__anext__() == 1
        await stream.on_stop()
        assert closed == [True]

    asyncio.run(scenario())


def test_a_stream_s_current_event_is_set_for_the_stream_and_for_faust_current_event():
    async def scenario() -> None:
        app = worker_app()
        stream = app.stream(app.topic("orders"))
        event = Handle()
        faust_internals.StreamHooks.set_current_event(stream, event)
        assert stream.current_event is event and current_event() is event
        faust_internals.StreamHooks.set_current_event(stream, None)
        assert stream.current_event is None and current_event() is None

    asyncio.run(scenario())


# -- recovery --------------------------------------------------------------------
class FakeRecoveryConsumer:
    def __init__(self, highwaters: dict[TP, int], position: int) -> None:
        self._highwaters, self._position = highwaters, position
        self.asked: list = []

    async def highwaters(self, *tps: TP) -> dict[TP, int]:
        self.asked.append(("highwaters", tps))
        return {tp: self._highwaters[tp] for tp in tps}

    async def position(self, tp: TP) -> int:
        self.asked.append(("position", tp))
        return self._position


def test_recovery_keeps_applied_offsets_per_changelog_partition_and_revoke_forgets_them():
    app = worker_app()
    recovery = app.tables.recovery
    assert recovery.in_recovery is False and not recovery.completed.is_set()
    assert recovery.active_tps == set() and recovery.standby_tps == set()
    recovery.active_offsets[CHANGELOG] = 8
    recovery.standby_offsets[TP(CHANGELOG.topic, 1)] = 3
    assert recovery.active_offsets.get(CHANGELOG) == 8 and recovery.standby_offsets.get(CHANGELOG) is None
    recovery.revoke(CHANGELOG)
    recovery.revoke(TP(CHANGELOG.topic, 1))
    assert CHANGELOG not in recovery.active_offsets and not recovery.standby_offsets


def test_recovery_is_done_once_it_applied_the_record_before_the_end_highwaters_names():
    async def scenario() -> None:
        app = worker_app()
        recovery = app.tables.recovery
        consumer = FakeRecoveryConsumer({CHANGELOG: 10}, position=0)
        await recovery._build_highwaters(consumer, {CHANGELOG}, recovery.active_highwaters, "active")
        assert consumer.asked == [("highwaters", (CHANGELOG,))]
        recovery.active_tps.add(CHANGELOG)
        recovery.active_offsets[CHANGELOG] = 8
        assert recovery.need_recovery() is True
        recovery.active_offsets[CHANGELOG] = 9
        assert recovery.need_recovery() is False

    asyncio.run(scenario())


class EnoughQuietSpells(BaseException):
    """Ends recovery's changelog loop, which swallows every Exception."""


@pytest.mark.parametrize("position, applied_after", [(6, 5), (9, 9)])
def test_after_quiet_spells_recovery_skips_to_the_end_only_if_consumer_position_reached_it(
    monkeypatch: pytest.MonkeyPatch, position: int, applied_after: int
):
    async def scenario() -> None:
        app = worker_app()
        recovery = app.tables.recovery
        app.consumer = consumer = FakeRecoveryConsumer({}, position=position)
        recovery.active_highwaters[CHANGELOG] = 9
        recovery.active_offsets[CHANGELOG] = 5
        quiet_spells = 0

        async def nothing_arrives(awaitable: Any, timeout: float) -> Any:
            nonlocal quiet_spells
            awaitable.close()
            quiet_spells += 1
            if quiet_spells == 3:
                raise EnoughQuietSpells
            raise asyncio.TimeoutError

        monkeypatch.setattr(
            faust.tables.recovery, "asyncio",
            SimpleNamespace(wait_for=nothing_arrives, TimeoutError=asyncio.TimeoutError)
        )
        with pytest.raises(EnoughQuietSpells):
            await type(recovery)._slurp_changelogs.fun(recovery)
        assert consumer.asked == [("position", CHANGELOG)]  # asked on the second quiet spell only
        assert recovery.active_offsets[CHANGELOG] == applied_after

    asyncio.run(scenario())


def test_recovery_whose_highwaters_raise_rebalance_again_waits_for_the_next_rebalance_instead_of_crashing():
    async def scenario() -> None:
        app = worker_app(stream_recovery_delay=0)
        app.Table("counts", default=int)
        recovery = app.tables.recovery
        asked = asyncio.Queue()

        class Unreadable:
            async def highwaters(self, *tps: TP) -> dict[TP, int]:
                asked.put_nowait(tps)
                raise faust.tables.recovery.RebalanceAgain()

        app.consumer = Unreadable()
        loop_task = asyncio.ensure_future(type(recovery)._restart_recovery.fun(recovery))
        try:
            for _ in range(2):  # the second recovery start is served too: the first did not end the loop
                recovery.signal_recovery_start.set()
                await asyncio.wait_for(asked.get(), timeout=30)
            assert not loop_task.done()
        finally:
            loop_task.cancel()

    asyncio.run(scenario())


def test_recovery_applies_its_buffer_once_it_holds_the_tables_buffer_size_and_skips_offsets_it_applied(
    monkeypatch: pytest.MonkeyPatch,
):
    async def scenario() -> None:
        app = worker_app()
        table = app.Table("counts", default=int)
        assert faust_internals.has_changelog_callback(table) is False
        assert faust_internals.has_changelog_callback(app.Table("other", on_changelog_event=no_callback)) is True
        table.recovery_buffer_size, table.standby_buffer_size = 2, 1
        standby = TP(CHANGELOG.topic, 1)
        recovery = app.tables.recovery
        recovery.active_tps.add(CHANGELOG)
        recovery.standby_tps.add(standby)
        recovery.tp_to_table.update({CHANGELOG: table, standby: table})
        applied: list[list[tuple[int, int]]] = []
        monkeypatch.setattr(table, "apply_changelog_batch",
                            lambda batch: applied.append([(e.message.tp.partition, e.message.offset) for e in batch]))
        arriving = [SimpleNamespace(message=SimpleNamespace(tp=tp, offset=offset))
                    for tp, offset in ((CHANGELOG, 4), (standby, 3), (CHANGELOG, 9), (CHANGELOG, 7), (CHANGELOG, 12))]

        async def next_event(awaitable: Any, timeout: float) -> Any:
            awaitable.close()
            if not arriving:
                raise EnoughQuietSpells
            return arriving.pop(0)

        monkeypatch.setattr(
            faust.tables.recovery, "asyncio", SimpleNamespace(wait_for=next_event, TimeoutError=asyncio.TimeoutError)
        )
        with pytest.raises(EnoughQuietSpells):
            await type(recovery)._slurp_changelogs.fun(recovery)
        # one buffer per table: the standby's record filled it first; 7 came after 9 was taken: skipped
        assert applied == [[(0, 4), (1, 3)], [(0, 9), (0, 12)]]

    asyncio.run(scenario())
