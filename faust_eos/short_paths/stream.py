"""A stream that hands out the events already queued for it in runs.

Faust's stream lets the event loop run before every event it hands out, and takes
each event from its channel through an awaited ``get``: one pass of the event loop
per event, with a ``select`` system call, in which the worker's other threads
(the consumer's fetching, the producers' calls) take the interpreter. With a
backlog, that pass cost an ordinary two-agent app a quarter of its event-loop
thread. :class:`Stream` takes the events its channel already holds without
waiting, and lets the loop run once a turn of :data:`TURN_SECONDS` is over, or
whenever its channel is empty. Everything else is as in Faust's stream:
processors, ``Skip``, joins' ``on_merge``, the sensors, ``current_event``, and
each event acknowledged once the agent comes back for the next one.

Faust's ``take`` gathers values in a task of its own, so the agent handles each
chunk outside any event, and what it sends would commit apart from the chunk's
input: a crash between the two would process the chunk again, and send its
records twice. Here the agent handles a chunk inside the chunk's last event
(``current_event()``), so what it sends and writes commits with that event's
offset. Faust acknowledges every event of a chunk at once when the agent comes
back for the next, so with one agent reading the topic they all commit in that
same transaction.

An app on ``eos://`` gets it as its ``Stream`` setting (:mod:`faust_eos.short_paths.adoption`).
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncGenerator, AsyncIterator, Optional, Sequence

from faust.exceptions import Skip
from faust.types import ChannelT, EventT
from mode.utils.futures import maybe_async

from faust_eos.faust_internals import StreamHooks, set_task_event
from faust_eos.short_paths.stream_sensors import StreamSensors

#: how long a stream hands out queued events (and its agent works on them) before it lets the event loop run
#: the worker's other tasks: about 100 events of an ordinary agent, and little beside any commit interval
TURN_SECONDS = 0.01

#: a value a stream does not hand out: its event came from an older generation, or a processor skipped it
_SKIPPED = object()


class Stream(StreamHooks):
    """Faust's stream, handing out the events queued for it without a pass of the event loop for each."""

    #: the event whose value went through the processors last: with ``take``, the last of the chunk
    _last_processed: Optional[Any] = None

    def take(self, max_: int, within: Any) -> AsyncGenerator[Sequence[Any], None]:
        return self._inside_last_event(super().take(max_, within))

    def take_events(self, max_: int, within: Any) -> AsyncGenerator[Sequence[EventT[Any]], None]:
        return self._inside_last_event(super().take_events(max_, within))

    def take_with_timestamp(self, max_: int, within: Any,
                            timestamp_field_name: str) -> AsyncGenerator[Sequence[Any], None]:
        return self._inside_last_event(super().take_with_timestamp(max_, within, timestamp_field_name))

    async def _inside_last_event(self, chunks: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
        """Hand out each chunk with the chunk's last event as the agent's current event."""
        try:
            async for chunk in chunks:
                # the agent's task alone: Faust's take reads the stream's current event as it gathers the next
                set_task_event(self._last_processed)  # read as the chunk is cut, before more is gathered
                try:
                    yield chunk
                finally:
                    set_task_event(None)
        finally:
            await chunks.aclose()  # Faust's take acknowledges the last chunk's events as it closes

    def __aiter__(self) -> AsyncIterator[Any]:
        iterator = self._values()
        self.begin_iterating(iterator)
        return iterator

    async def _values(self) -> AsyncGenerator[Any, None]:
        started_here = await self.maybe_start()
        channel = self.channel
        queue = channel.queue if isinstance(channel, ChannelT) else None
        next_item = channel.__anext__
        app = self.app
        sensors = app.sensors
        stream_sensors = StreamSensors((), self)
        consumer = app.consumer
        acking_topics = app.topics.acking_topics
        turn_ends = 0.0
        try:
            while not self.should_stop:
                acks = self.enable_acks
                queued = queue is not None and not queue.empty()
                if queued and time.monotonic() < turn_ends:
                    assert queue is not None  # queued: it is
                    item = queue.get_nowait()
                else:
                    if queued:  # the turn is over
                        await asyncio.sleep(0)
                    item = await next_item()  # waits while nothing is queued
                    turn_ends = time.monotonic() + TURN_SECONDS
                    if tuple(sensors) != stream_sensors.sensors:  # sensors come and go rarely
                        stream_sensors = StreamSensors(tuple(sensors), self)
                event: Any = None
                if isinstance(item, EventT):
                    event, message = item, item.message
                    if not app.flow_control.is_active() or message.generation_id != app.consumer_generation_id:
                        continue  # from before a rebalance: neither processed nor acknowledged, fetched again
                    if message.topic in acking_topics and not message.tracked:
                        message.tracked = True
                        consumer.track_message(message)
                    watching = stream_sensors
                    sensor_state = watching.event_in(message.tp, message.offset, event)
                    self.set_current_event(event)
                    value = event.value
                else:
                    self.set_current_event(None)
                    value = item
                    if value is None:  # a plain channel's None is no value: as in Faust, the stream waits on
                        continue
                self._last_processed = event
                value = await self._processed(value)
                try:
                    if value is not _SKIPPED:
                        self.events_total += 1
                        yield value
                finally:
                    self.current_event = None
                    if event is not None and (acks or value is _SKIPPED):
                        message = event.message
                        last = event.ack()
                        watching.event_out(message.tp, message.offset, event, sensor_state)
                        if last:
                            sensors.on_message_out(message.tp, message.offset, message)
        except StopAsyncIteration:  # a stream over an iterable that ended
            return
        finally:
            on_stop_iteration = getattr(channel, "on_stop_iteration", None)
            if on_stop_iteration is not None:
                on_stop_iteration()
            if started_here:
                await self.stop()
                self.service_reset()

    async def _processed(self, value: Any) -> Any:
        """``value`` through the stream's processors and its join, or :data:`_SKIPPED`."""
        try:
            for processor in self.processors:
                value = await maybe_async(processor(value))
            return await self.on_merge(value)
        except Skip:
            return _SKIPPED
