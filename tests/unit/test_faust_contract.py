"""Contract of Faust's consumer: each behaviour faust-eos relies on, checked against the installed Faust.

faust_eos.faust_internals overrides private consumer methods through public
hooks (fetch_batch, note_gap, committable_offsets, seek_partition) and reads
private state (_committed_offset, _acked, _acked_index, _thread, aiokafka's
_coordinator and _client), and builds the worker's aiokafka consumer with its own
fetch wait and size (_new_consumer_thread, _create_worker_consumer, aiokafka's
_fetch_max_wait_ms and _fetch_min_bytes). Each test drives Faust's own code with fakes and fails if a
release stops behaving as the layer expects.
See also test_faust_contract_app.py, test_faust_contract_store.py and
test_faust_contract_rules.py.
"""
from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.client import AIOKafkaClient
from aiokafka.consumer.group_coordinator import GroupCoordinator
from faust.exceptions import ConsumerNotStarted
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.transport.drivers.aiokafka import Consumer as FaustConsumer
from faust.types import TP
from faust_contract_support import (
    ORDERS,
    RecordingConsumer,
    RecordingTransactions,
    record,
    recording_consumer,
    worker_app,
)
from mode.services import ServiceTask

from faust_eos.options import DEFAULT_FETCH_MAX_WAIT_MS, FETCH_MIN_BYTES

OTHER_ORDERS = TP("orders", 1)


class StopTimer(Exception):
    """Ends a Faust loop that would otherwise run for ever."""


def fetching_consumer(app: Any, *offsets: int) -> RecordingConsumer:
    consumer = recording_consumer(app)
    consumer.resume_partitions({ORDERS})  # the partition is active, as after an assignment
    consumer.fetched = {ORDERS: [record(offset) for offset in offsets]}
    return consumer


# -- fetching ------------------------------------------------------------------
def test_getmany_fetches_through_fetch_batch_with_the_active_partitions_and_timeout():
    async def scenario() -> None:
        app = worker_app()
        app.consumer_generation_id = 4
        consumer = fetching_consumer(app, 5, 6)
        handed_out = [(tp, message) async for tp, message in consumer.getmany(timeout=2.0)]
        assert consumer.calls == [("fetch_batch", {ORDERS}, 2.0)]
        assert [(tp, message.offset) for tp, message in handed_out] == [(ORDERS, 5), (ORDERS, 6)]
        assert all(message.generation_id == 4 and message.acked is False for _, message in handed_out)

    asyncio.run(scenario())


def test_a_batch_fetched_while_the_flow_stopped_is_dropped_and_the_consumer_seeks_back_to_committed_offsets():
    class StoppedDuringFetch(RecordingConsumer):
        async def fetch_batch(self, active_partitions: Any, timeout: float) -> Any:
            self.stop_flow()  # a rebalance begins while the fetch runs
            return await super().fetch_batch(active_partitions, timeout)

    async def scenario() -> None:
        app = worker_app()
        consumer = recording_consumer(app, StoppedDuringFetch)
        consumer.resume_partitions({ORDERS})
        consumer.fetched = {ORDERS: [record(5)]}
        consumer.committed = {ORDERS: 3}
        handed_out = [item async for item in consumer.getmany(timeout=1.0)]
        assert handed_out == []
        assert consumer.calls[-1] == ("seek_to_committed",)
        # perform_seek records what seek_to_committed answered as committed
        assert consumer._committed_offset[ORDERS] == 3

    asyncio.run(scenario())


def test_getmany_stops_handing_out_a_batch_once_the_generation_changes():
    async def scenario() -> None:
        app = worker_app()
        consumer = fetching_consumer(app, 5, 6, 7)
        batch = consumer.getmany(timeout=1.0)
        _, first = await batch.__anext__()
        app.consumer_generation_id += 1  # a rebalance assigned partitions again
        rest = [message async for _, message in batch]
        assert first.offset == 5 and rest == []

    asyncio.run(scenario())


def test_the_fetch_loop_reports_offsets_skipped_between_two_records_to_note_gap():
    async def scenario() -> None:
        app = worker_app()
        app.topics.acking_topics.add(ORDERS.topic)  # as for a topic an agent consumes
        handed: list[int] = []

        async def callback(message: Any) -> None:
            handed.append(message.offset)

        consumer = recording_consumer(app, callback=callback)
        fetcher = SimpleNamespace(_stopped=threading.Event())

        async def getmany(timeout: float) -> Any:
            for offset in (5, 9):  # offsets 6 to 8 hold no record (e.g. transaction markers)
                yield ORDERS, SimpleNamespace(offset=offset, topic=ORDERS.topic, key=None, value=None)
            fetcher._stopped.set()

        consumer.getmany = getmany
        await consumer._drain_messages(fetcher)
        assert handed == [5, 9]
        assert consumer.calls == [("note_gap", ORDERS, 6, 9)]

    asyncio.run(scenario())


# -- commits -------------------------------------------------------------------
def acked(app: Any, consumer: RecordingConsumer, *offsets: int) -> None:
    """Acknowledge messages of ORDERS the way a stream does, through Faust's ack."""
    app.topics.acking_topics.add(ORDERS.topic)
    for offset in offsets:
        message = consumer._to_message(ORDERS, record(offset))
        message.incref()
        message.ack(consumer)


def test_consumer_commit_round_asks_committable_offsets_about_each_partition_with_acknowledgements():
    async def scenario() -> None:
        app = worker_app()
        consumer = recording_consumer(app)
        consumer.transactions = RecordingTransactions()
        acked(app, consumer, 5)
        assert await consumer.force_commit() is False  # committable_offsets named nothing
        assert consumer.calls == [("committable_offsets", [ORDERS])]
        assert consumer.transactions.log == []
        consumer.calls.clear()
        await consumer.force_commit({"payments"})
        assert consumer.calls == [("committable_offsets", [])]

    asyncio.run(scenario())


def test_offsets_committable_offsets_names_commit_through_the_transactions_and_are_recorded_even_if_it_fails():
    async def scenario() -> None:
        app = worker_app()
        consumer = recording_consumer(app)
        consumer.transactions = RecordingTransactions(commit_result=False)
        consumer.assignment = lambda: {ORDERS}
        consumer.committable = {ORDERS: 6}
        acked(app, consumer, 5)
        assert await consumer.force_commit(start_new_transaction=False) is False
        assert consumer.transactions.log == [
            ("transactions.commit", ({ORDERS: 6},), {"start_new_transaction": False})
        ]
        assert consumer._committed_offset[ORDERS] == 6

    asyncio.run(scenario())


def test_committed_offsets_and_acknowledgement_lists_have_the_shapes_the_layer_reads():
    async def scenario() -> None:
        app = worker_app()
        consumer = recording_consumer(app)
        assert consumer._committed_offset[OTHER_ORDERS] is None  # never committed: None, not missing
        acked(app, consumer, 5, 6)
        assert consumer._acked[ORDERS] == [5, 6]
        assert consumer._acked_index[ORDERS] == {5, 6}
        assert consumer._acked[OTHER_ORDERS] == [] and consumer._acked_index[OTHER_ORDERS] == set()

    asyncio.run(scenario())


def test_a_message_is_acked_once_every_stream_that_took_it_acked_it():
    async def scenario() -> None:
        app = worker_app()
        consumer = recording_consumer(app)
        message = consumer._to_message(ORDERS, record(5))
        message.incref()
        message.incref()  # two streams took it
        message.ack(consumer)
        assert message.acked is False
        message.ack(consumer)
        assert message.acked is True

    asyncio.run(scenario())


def test_seek_moves_the_partition_through_seek_partition():
    async def scenario() -> None:
        consumer = recording_consumer(worker_app())
        await consumer.seek(ORDERS, 42)
        assert consumer.calls == [("seek_partition", ORDERS, 42)]

    asyncio.run(scenario())


def test_the_commit_timer_calls_force_commit_for_all_topics_every_commit_interval():
    class TimerStops(RecordingConsumer):
        async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
            self.calls.append(("force_commit", topics, start_new_transaction))
            raise StopTimer

    async def scenario() -> None:
        consumer = recording_consumer(worker_app(broker_commit_interval=0.001), TimerStops)
        try:
            await type(consumer)._commit_handler.fun(consumer)  # the body of Faust's commit timer
        except StopTimer:
            pass
        assert consumer.calls == [("force_commit", None, True)]

    asyncio.run(scenario())


def test_faust_starts_its_timer_commits_as_the_service_task_named_commit_handler():
    # faust_eos replaces that task by name; under another name Faust's own timer would run beside it
    assert "_commit_handler" in FaustConsumer._tasks[FaustConsumer._get_class_id()]
    assert isinstance(FaustConsumer._commit_handler, ServiceTask)


def test_a_commit_asked_while_another_runs_waits_for_it_and_commits_nothing_itself():
    class SlowCommit(RecordingConsumer):
        async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
            self.calls.append(("force_commit", topics, start_new_transaction))
            self.entered.set()
            await self.release.wait()
            return True

    async def scenario() -> None:
        consumer = recording_consumer(worker_app(), SlowCommit)
        consumer.entered, consumer.release, second_waits = asyncio.Event(), asyncio.Event(), asyncio.Event()
        faust_wait = consumer.maybe_wait_for_commit_to_finish

        async def observed_wait() -> bool:
            if consumer.entered.is_set():
                second_waits.set()  # then, without yielding, Faust's wait for the running commit
            return await faust_wait()

        consumer.maybe_wait_for_commit_to_finish = observed_wait
        first = asyncio.ensure_future(consumer.commit())
        await consumer.entered.wait()
        second = asyncio.ensure_future(consumer.commit())
        await second_waits.wait()
        consumer.release.set()
        assert (await first, await second) == (True, False)
        assert consumer.calls == [("force_commit", None, True)]

    asyncio.run(scenario())


# -- the consumer thread and aiokafka ------------------------------------------
class FakeAioKafkaConsumer:
    stopped = False

    async def stop(self) -> None:
        self.stopped = True


def test_the_consumer_thread_runs_calls_on_its_own_loop_and_thread():
    async def scenario() -> None:
        app = worker_app()
        thread = app.consumer._thread
        assert isinstance(thread, AIOKafkaConsumerThread)
        with pytest.raises(ConsumerNotStarted):
            thread._ensure_consumer()
        fake = FakeAioKafkaConsumer()

        async def start_without_broker() -> None:
            thread._consumer = fake

        thread.on_start = start_without_broker
        await thread.start()
        try:
            assert thread._ensure_consumer() is fake
            where = await thread.call_thread(lambda: (threading.get_ident(), asyncio.get_running_loop()))
            assert where[0] != threading.get_ident() and where[1] is thread.thread_loop
            ran_on = asyncio.get_running_loop().create_future()
            main_loop = asyncio.get_running_loop()
            thread.thread_loop.call_soon_threadsafe(
                lambda: main_loop.call_soon_threadsafe(ran_on.set_result, threading.get_ident())
            )
            assert await ran_on == where[0]
        finally:
            await thread.stop()
        assert fake.stopped

    asyncio.run(scenario())


def coordinator_scenario(check: Callable[[GroupCoordinator], None]) -> None:
    """Start an aiokafka consumer of a group without any broker, and ``check`` the coordinator its start set."""

    async def scenario() -> None:
        consumer = AIOKafkaConsumer(group_id="contract", bootstrap_servers="localhost:1")
        assert consumer._coordinator is None

        async def bootstrap_without_broker() -> None:
            pass

        consumer._client.bootstrap = bootstrap_without_broker
        await consumer.start()
        try:
            assert isinstance(consumer._coordinator, GroupCoordinator)
            check(consumer._coordinator)
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def test_aiokafka_consumer_start_sets_a_group_coordinator_whose_request_rejoin_asks_for_a_rebalance():
    def check(coordinator: GroupCoordinator) -> None:
        assigned = SimpleNamespace(assignment=object())
        assert coordinator.need_rejoin(assigned) is False
        coordinator.request_rejoin()
        assert coordinator.need_rejoin(assigned) is True

    coordinator_scenario(check)


def test_an_aiokafka_coordinator_outside_the_group_has_generation_minus_one_and_no_member_id():
    # the transaction manager commits nothing then: the broker takes offsets sent without a generation from anyone
    def check(coordinator: GroupCoordinator) -> None:
        assert (coordinator.generation, coordinator.member_id) == (-1, "")
        coordinator.generation, coordinator.member_id = 5, "member-1"  # as a join sets them
        coordinator.reset_generation()  # as the group's "unknown member" and "illegal generation" answers do
        assert (coordinator.generation, coordinator.member_id) == (-1, "")

    coordinator_scenario(check)


@pytest.mark.parametrize("processing_guarantee", ["exactly_once", "at_least_once"])
def test_the_workers_aiokafka_consumer_hands_its_fetcher_the_fetch_wait_of_the_broker_url_and_the_fetch_size(
        processing_guarantee):
    async def scenario() -> None:
        app = worker_app(processing_guarantee, broker="eos://localhost:9092?fetch_max_wait_ms=35")
        thread = app.consumer._thread
        consumer = thread._create_consumer(loop=asyncio.get_running_loop())
        assert isinstance(consumer, AIOKafkaConsumer) and consumer._group_id == "contract"

        async def bootstrap_without_broker() -> None:
            pass

        consumer._client.bootstrap = bootstrap_without_broker
        await consumer.start()
        try:
            assert consumer._fetcher._fetch_max_wait_ms == 35
            assert consumer._fetcher._fetch_min_bytes == FETCH_MIN_BYTES > 1
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def test_without_a_fetch_wait_in_the_broker_url_the_consumer_waits_the_default_not_faust_s_1500_ms():
    async def build() -> Any:
        return worker_app().consumer._thread._create_consumer(loop=asyncio.get_running_loop())

    assert asyncio.run(build())._fetch_max_wait_ms == DEFAULT_FETCH_MAX_WAIT_MS != 1500


def test_aiokafka_consumer_client_force_metadata_update_asks_for_an_update_without_arguments():
    async def scenario() -> None:
        consumer = AIOKafkaConsumer(group_id="contract", bootstrap_servers="localhost:1")
        client = consumer._client
        assert isinstance(client, AIOKafkaClient)
        update = client.force_metadata_update()
        assert asyncio.isfuture(update) and not update.done()  # the update runs in the background
        await client.close()

    asyncio.run(scenario())
