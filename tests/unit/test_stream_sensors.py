"""A stream tells the app's sensors of its events as Faust's sensor delegate does, keeping the same books."""
from __future__ import annotations

from typing import Any

import faust
from faust.sensors.base import SensorDelegate
from faust.types import TP

from faust_eos.short_paths.stream_sensors import StreamSensors, keeps_monitor_hooks


class Task:
    """Stands for the agent's task that iterates a stream."""

    def __str__(self) -> str:
        return "<Task agent>"


class FakeStream:
    """What the sensors read of a stream: itself as a key and name, and the task iterating it."""

    def __init__(self) -> None:
        self.task_owner = Task()

    def __str__(self) -> str:
        return "Stream: payments"


class Recording(faust.Sensor):
    """A sensor of the app's own with stream hooks: records its calls and the state it is handed back."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        self.calls.append(("in", tp, offset, stream, event))
        return {"offset": offset}

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        self.calls.append(("out", tp, offset, stream, event, state))


class CountingMonitor(faust.Monitor):
    """A monitor that adds to the monitor's own stream hooks, as Faust's Prometheus monitor does."""

    extra = 0

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        self.extra += 1
        return super().on_stream_event_in(tp, offset, stream, event)


def books(monitor: faust.Monitor) -> dict[str, Any]:
    """What a monitor keeps of stream events, its run times as a count (they are timings)."""
    return {
        "events_total": monitor.events_total,
        "events_active": monitor.events_active,
        "events_by_stream": dict(monitor.events_by_stream),
        "events_by_task": dict(monitor.events_by_task),
        "inbound_partitions": sorted(monitor.stream_inbound_time),
        "runtimes": len(monitor.events_runtime),
    }


def run_events(take: Any, finish: Any, tps: list[TP], finish_all: bool) -> None:
    states = [(tp, offset, take(tp, offset)) for offset, tp in enumerate(tps)]
    for tp, offset, state in states if finish_all else states[:-1]:
        finish(tp, offset, state)


def test_faust_s_monitor_keeps_the_same_books_as_through_faust_s_sensor_delegate():
    tps = [TP("payments", 0), TP("payments", 1), TP("payments", 0)]
    stream = FakeStream()

    through_faust, monitor = SensorDelegate(app=None), faust.Monitor()
    through_faust._sensors.add(monitor)
    run_events(lambda tp, offset: through_faust.on_stream_event_in(tp, offset, stream, None),
               lambda tp, offset, state: through_faust.on_stream_event_out(tp, offset, stream, None, state),
               tps, finish_all=False)

    own_monitor = faust.Monitor()
    watching = StreamSensors((own_monitor,), stream)
    run_events(lambda tp, offset: watching.event_in(tp, offset, None),
               lambda tp, offset, state: watching.event_out(tp, offset, None, state),
               tps, finish_all=False)

    assert books(own_monitor) == books(monitor)
    assert books(own_monitor)["events_by_task"] == {"<Task agent>": 3}
    assert books(own_monitor)["events_active"] == 1  # the last event is still being processed


def test_a_stream_is_counted_under_the_name_faust_s_monitor_already_gave_it():
    stream, monitor = FakeStream(), faust.Monitor()
    monitor.stream_lookup[stream] = "payments stream, as first named"
    watching = StreamSensors((monitor,), stream)
    watching.event_out(TP("payments", 0), 7, None, watching.event_in(TP("payments", 0), 7, None))
    assert dict(monitor.events_by_stream) == {"payments stream, as first named": 1}


def test_other_sensors_are_called_with_their_hooks_and_handed_back_their_state():
    stream, recording, counting = FakeStream(), Recording(), CountingMonitor()
    watching = StreamSensors((faust.Monitor(), recording, counting), stream)
    tp = TP("payments", 2)
    watching.event_out(tp, 40, "event", watching.event_in(tp, 40, "event"))
    assert recording.calls == [("in", tp, 40, stream, "event"), ("out", tp, 40, stream, "event", {"offset": 40})]
    assert counting.extra == 1
    assert counting.events_total == 1 and counting.events_active == 0


def test_only_a_monitor_with_its_own_stream_hooks_has_its_books_kept_directly():
    assert keeps_monitor_hooks(faust.Monitor())
    assert not keeps_monitor_hooks(CountingMonitor())
    assert not keeps_monitor_hooks(Recording())


def test_with_no_sensor_watching_streams_nothing_is_kept():
    watching = StreamSensors((faust.Sensor(),), FakeStream())
    assert watching.event_in(TP("payments", 0), 1, None) is None
    watching.event_out(TP("payments", 0), 1, None, None)
