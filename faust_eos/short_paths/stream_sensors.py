"""The app's sensors, told of each event a stream takes and finishes, at the cost each sensor needs.

Faust tells its sensors of every event a stream takes and finishes through the
app's sensor delegate: a dictionary of per-sensor states built per event, and in
Faust's own :class:`faust.Monitor`, weak-reference lookups of the stream and of
its task to find the names it counts them under, at every event. :class:`StreamSensors`
keeps the same books for one stream, working out once what each sensor needs:

* a sensor whose stream hooks are :class:`faust.Monitor`'s own has its counters
  moved directly (events in total, by stream and by task, active, the partition's
  last inbound time, each event's run time), under the names Faust's monitor
  gives the stream and its task;
* any other sensor with stream hooks of its own is called as Faust calls it,
  handed back the state it returned for the event;
* a sensor without stream hooks is not called.
"""
from __future__ import annotations

from time import monotonic
from typing import Any, Optional

import faust
from faust.types import TP

from faust_eos.short_paths.event_path import overrides

STREAM_HOOKS = ("on_stream_event_in", "on_stream_event_out")


def keeps_monitor_hooks(sensor: Any) -> bool:
    """Whether ``sensor`` is a :class:`faust.Monitor` whose stream hooks are the monitor's own."""
    return isinstance(sensor, faust.Monitor) and all(
        getattr(type(sensor), hook) is getattr(faust.Monitor, hook) for hook in STREAM_HOOKS)


class StreamSensors:
    """One stream's way of telling a set of sensors of its events."""

    __slots__ = ("sensors", "_stream", "_monitors", "_others", "_stream_keys", "_task", "_task_keys")

    def __init__(self, sensors: tuple[Any, ...], stream: Any) -> None:
        #: the sensors this was worked out for
        self.sensors = sensors
        self._stream = stream
        self._monitors = tuple(sensor for sensor in sensors if keeps_monitor_hooks(sensor))
        self._others = tuple(sensor for sensor in sensors
                             if sensor not in self._monitors and overrides(sensor, STREAM_HOOKS))
        self._stream_keys = tuple(_name_in(monitor.stream_lookup, stream) for monitor in self._monitors)
        self._task: Any = None
        self._task_keys: tuple[str, ...] = ()

    def event_in(self, tp: TP, offset: int, event: Any) -> Optional[list[Any]]:
        """Tell the sensors the stream took ``event``; returns what :meth:`event_out` is to be handed."""
        monitors, others = self._monitors, self._others
        if not monitors and not others:
            return None
        state: list[Any] = []
        if monitors:
            owner = self._stream.task_owner
            if owner is not self._task or not self._task_keys:
                self._task = owner
                self._task_keys = tuple(_name_in(monitor.task_lookup, owner) for monitor in monitors)
            now = monotonic()
            for monitor, stream_key, task_key in zip(monitors, self._stream_keys, self._task_keys):
                monitor.events_total += 1
                monitor.stream_inbound_time[tp] = now
                monitor.events_by_stream[stream_key] += 1
                monitor.events_by_task[task_key] += 1
                monitor.events_active += 1
                state.append(monitor.time())
        for sensor in others:
            state.append(sensor.on_stream_event_in(tp, offset, self._stream, event))
        return state

    def event_out(self, tp: TP, offset: int, event: Any, state: Optional[list[Any]]) -> None:
        """Tell the sensors the stream is done with ``event``; ``state`` is what :meth:`event_in` returned."""
        if state is None:
            return
        monitors = self._monitors
        for monitor, time_in in zip(monitors, state):
            monitor.events_active -= 1
            monitor.events_runtime.append(monitor.time() - time_in)
        for sensor, sensor_state in zip(self._others, state[len(monitors):]):
            sensor.on_stream_event_out(tp, offset, self._stream, event, sensor_state)


def _name_in(names: Any, key: Any) -> str:
    """The name a monitor counts ``key`` (a stream or a task) under: the one it gave it, else ``str(key)``, kept."""
    if key is None:
        return str(key)
    name: Optional[str] = names.get(key)
    if name is None:
        name = names[key] = str(key)
    return name
