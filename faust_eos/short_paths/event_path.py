"""What every send and table operation inside one event shares, worked out once per event.

An agent handed a batch (:mod:`faust_eos.short_paths.batches`) sends and writes to tables
hundreds of times inside one Faust event. Where those records are staged,
the input partition they belong to and which of Faust's sensors want to hear
of them are the same for all of them: :meth:`EventPaths.current` works them out at
the event's first operation and hands the same answer to the rest.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Protocol

import faust
from faust.streams import current_event

from faust_eos.committing.guarantee import Guarantee
from faust_eos.state.staging import SourceTP

#: the sensor hooks the short paths call, each only on the sensors that do something in it
SEND_HOOKS = ("on_send_initiated", "on_send_completed", "on_send_error")
TABLE_HOOKS = ("on_table_get", "on_table_set", "on_table_del")


class Watching:
    """Which of the app's sensors see sends and table operations, worked out once for a set of sensors."""

    __slots__ = ("sensors", "send_sensors", "sensors_read_records", "table_sensors")

    def __init__(self, sensors: tuple[Any, ...]) -> None:
        self.sensors = sensors
        #: sensors with sends of their own to watch (each is called for every send, as Faust calls it)
        self.send_sensors = tuple(sensor for sensor in sensors if overrides(sensor, SEND_HOOKS))
        #: whether any of them reads the records sent (the message, its metadata); Faust's own
        #: monitor only counts and times sends
        self.sensors_read_records = any(type(sensor) is not faust.Monitor for sensor in self.send_sensors)
        #: sensors with table reads, writes or deletes to watch
        self.table_sensors = tuple(sensor for sensor in sensors if overrides(sensor, TABLE_HOOKS))


class EventPath:
    """The event being processed, where its records are staged, and the sensors that see its operations."""

    __slots__ = ("event", "staging", "tables", "source", "offset", "partition", "send_sensors",
                 "sensors_read_records", "table_sensors")

    def __init__(self, event: Any, staging: Guarantee, watching: Watching) -> None:
        message = event.message
        self.event = event
        #: where its output records go: the worker's guarantee
        self.staging = staging
        #: where its table writes go (:class:`faust_eos.state.table_state.TableState`)
        self.tables = staging.tables
        #: its input partition and offset, which its records and writes commit with
        self.source = SourceTP(message.topic, message.partition)
        self.offset: int = message.offset
        #: the event's input partition: the partition of every table it writes
        self.partition: int = message.partition
        self.send_sensors = watching.send_sensors
        self.sensors_read_records = watching.sensors_read_records
        self.table_sensors = watching.table_sensors


class EventPaths:
    """One consumer's short path for the event being processed."""

    def __init__(self, staging_for_sends: Callable[[], Optional[Guarantee]], sensors: Callable[[], Iterable[Any]],
                 on_event: Callable[[], None]) -> None:
        self._staging_for_sends = staging_for_sends
        self._sensors = sensors
        self._on_event = on_event  # called as each event begins its first operation
        self._event: Any = None
        self._path: Optional[EventPath] = None
        self._watching = Watching(())

    def current(self) -> Optional[EventPath]:
        """The path of the event being processed; None outside events, or before records can be staged."""
        event = current_event()
        if event is None:
            return None
        if event is not self._event:
            staging = self._staging_for_sends()
            self._path = None if staging is None else EventPath(event, staging, self._watching_now())
            self._event = event
            self._on_event()
        return self._path

    def _watching_now(self) -> Watching:
        """What the app's sensors watch; worked out again only when they change (sensors come and go rarely)."""
        sensors = tuple(self._sensors())
        if sensors != self._watching.sensors:
            self._watching = Watching(sensors)
        return self._watching


class EventPathsOwner(Protocol):
    """The worker's consumer, as the short paths ask it where the event being processed sends."""

    event_paths: EventPaths

    def staging_for_sends(self) -> Optional[Guarantee]:
        """Where a record sent now is staged; None if it takes Faust's path."""


def overrides(sensor: Any, hooks: tuple[str, ...]) -> bool:
    """Whether ``sensor`` does something in one of ``hooks`` (a ``faust.Sensor``'s own do nothing)."""
    return any(getattr(type(sensor), hook, None) is not getattr(faust.Sensor, hook) for hook in hooks)
