"""An ordinary stream on eos:// hands out the events queued for it in runs, and otherwise as Faust's stream does.

The app is a worker app whose consumer is made (so it is adopted) and never
started; events come from fetched batches, as in ``test_unpacking.py``; no broker.
"""
from __future__ import annotations

import asyncio
from typing import Any

import faust
from faust_contract_support import worker_app
from test_unpacking import Payment, batch_event

from faust_eos.short_paths import stream as stream_module
from faust_eos.short_paths.stream import Stream


def payments(*cents: int) -> list[bytes]:
    return [b'{"merchant": "m", "cents": %d}' % c for c in cents]


async def queued_stream(*cents: int) -> tuple[Any, Any, Any]:
    """A worker app, a stream over a payments topic, and the batch event of ``cents`` (at most 100) put in the
    stream's queue."""
    app = worker_app()
    assert app.consumer is not None  # made as the worker starts: the app is adopted
    app.flow_control.resume()  # as once the worker's partitions are assigned
    stream = app.stream(app.topic("payments", key_type=str, value_type=Payment))
    event = await batch_event(app, stream.channel, *payments(*cents))
    stream.channel.queue.put_nowait(event)
    return app, stream, event


def test_an_app_on_eos_streams_with_the_library_s_stream_and_its_own_stream_class_is_left_alone():
    app = worker_app()
    assert app.consumer is not None
    assert type(app.stream(app.topic("payments"))) is Stream

    class OwnStream(faust.Stream):
        """A stream class of the app's own."""

    own = worker_app(Stream=OwnStream)
    assert own.consumer is not None
    assert type(own.stream(own.topic("payments"))) is OwnStream


def test_values_come_out_in_order_through_the_processors_with_their_event_current_and_each_acknowledged():
    async def scenario() -> None:
        app, stream, batch = await queued_stream(1, 2, 3)
        stream.add_processor(lambda payment: payment.cents * 10)
        values = stream.__aiter__()
        seen = []
        for _ in range(3):
            value = await values.__anext__()
            event = stream.current_event
            seen.append((value, event.message.offset, faust.current_event() is event, event.message.acked))
        assert seen == [(10, 40, True, False), (20, 41, True, False), (30, 42, True, False)]
        assert not batch.message.acked  # the agent is still on the last record
        await values.aclose()  # it asks for the next one, or stops
        assert batch.message.acked  # every record acknowledged: a commit may pass the batch

    asyncio.run(scenario())


def test_a_value_a_processor_skips_is_not_handed_out_but_is_acknowledged():
    async def scenario() -> None:
        app, stream, batch = await queued_stream(1, 2, 3)

        def odd_only(payment: Payment) -> Payment:
            if payment.cents % 2 == 0:
                raise faust.exceptions.Skip()
            return payment

        stream.add_processor(odd_only)
        values = stream.__aiter__()
        assert [(await values.__anext__()).cents for _ in range(2)] == [1, 3]
        await values.aclose()
        assert batch.message.acked

    asyncio.run(scenario())


async def turns_seen(count: int) -> list[int]:
    """For each of ``count`` queued events, how often another task had run when the stream handed it out."""
    app, stream, batch = await queued_stream(*range(count))
    turns = 0

    async def other_task() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.ensure_future(other_task())
    await asyncio.sleep(0)
    values = stream.__aiter__()
    turns_at = []
    for _ in range(count):
        await values.__anext__()
        turns_at.append(turns)
    other.cancel()
    await values.aclose()
    assert batch.message.acked
    return turns_at


def test_queued_events_are_handed_out_in_a_run_without_a_pass_of_the_event_loop_for_each(monkeypatch):
    monkeypatch.setattr(stream_module, "TURN_SECONDS", 3600)
    turns_at = asyncio.run(turns_seen(100))
    assert len(set(turns_at)) == 1


def test_once_a_turn_is_over_the_event_loop_runs_other_tasks_before_the_next_event(monkeypatch):
    monkeypatch.setattr(stream_module, "TURN_SECONDS", 0)
    turns_at = asyncio.run(turns_seen(100))
    assert all(later > earlier for earlier, later in zip(turns_at, turns_at[1:]))


def test_an_event_from_before_a_rebalance_is_neither_handed_out_nor_acknowledged():
    async def scenario() -> None:
        app, stream, batch = await queued_stream(1, 2)
        stale = stream.channel.queue.get_nowait()
        stale.message.generation_id = app.consumer_generation_id - 1
        stream.channel.queue._queue.appendleft(stale)
        values = stream.__aiter__()
        assert (await values.__anext__()).cents == 2
        await values.aclose()
        assert not stale.message.acked and not batch.message.acked  # fetched again after the rebalance

    asyncio.run(scenario())


def test_an_agent_takes_each_chunk_inside_its_last_event_so_what_it_sends_commits_with_the_chunk():
    async def scenario() -> None:
        app, stream, batch = await queued_stream(1, 2, 3, 4, 5)
        taken = stream.take(3, within=0.05)
        chunks = []
        for _ in range(2):
            chunk = await taken.__anext__()
            event = faust.current_event()
            chunks.append(([payment.cents for payment in chunk], event.message.offset, event.message.acked))
        assert chunks == [([1, 2, 3], 42, False), ([4, 5], 44, False)]  # not acknowledged while handled
        await taken.aclose()
        assert faust.current_event() is None  # done with its chunks, the agent is outside any event
        assert batch.message.acked
        await stream.stop()

    asyncio.run(scenario())
