"""Prometheus metrics of a worker, served at ``/metrics`` on its web port.

Counters are updated where things happen: the agents' here, the exactly-once
layer's (commits, restores, sweeps) in :mod:`faust_eos.metrics`. Gauges that
describe the worker's current state (lag, LSO lag, table sizes, recovery,
readiness) are computed on each scrape by :func:`refresh`, from the broker and
the worker's own state.

Counters count processing, not committed output: under exactly-once an event
whose transaction is lost (fenced, aborted, worker killed) is processed again
and counted again, by this worker or the partition's next owner.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Optional

from confluent_kafka import KafkaException
from faust.exceptions import ConsumerNotStarted
from faust.types import TP
from prometheus_client import Counter, disable_created_metrics
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from config import settings
from faust_eos.state.store import Store
from kafka_ops.offsets import PartitionOffsets, WatermarkReader, read_offsets

log = logging.getLogger(__name__)

disable_created_metrics()  # no *_created series: they only double what a scrape shows

PREFIX = "faust_eos"
SCRAPE_TIMEOUT_S = 5.0

# -- stream processing, per agent and input topic --------------------------------
_AGENT_LABELS = ["agent", "topic"]
events_in = Counter(f"{PREFIX}_events_in_total", "Events an agent took from its input topic", _AGENT_LABELS)
events_aggregated = Counter(
    f"{PREFIX}_events_aggregated_total", "Events added to the running totals (and to their window, unless late)",
    _AGENT_LABELS
)
events_deduplicated = Counter(
    f"{PREFIX}_events_deduplicated_total", "Repeats of a counted event_id with the same content, dropped", _AGENT_LABELS
)
events_conflicting = Counter(
    f"{PREFIX}_events_conflicting_total", "Repeats of a counted event_id with other content", _AGENT_LABELS
)
events_dead_lettered = Counter(
    f"{PREFIX}_events_dead_lettered_total", "Events sent to the dead-letter topic, by reason",
    [*_AGENT_LABELS, "reason"]
)


class AgentMetrics:
    """The stream counters of one agent reading one topic, labels bound.

    Every series exists from the start at 0, one per dead-letter reason the agent
    can give too: a series that first appears already counting hides that first
    count from ``rate()`` and ``increase()``.
    """

    def __init__(self, agent: str, topic: str, dead_letter_reasons: Iterable[str]) -> None:
        self._labels = (agent, topic)
        self.events_in = events_in.labels(*self._labels)
        self.aggregated = events_aggregated.labels(*self._labels)
        self.deduplicated = events_deduplicated.labels(*self._labels)
        self.conflicting = events_conflicting.labels(*self._labels)
        for reason in dead_letter_reasons:
            events_dead_lettered.labels(*self._labels, reason)

    def dead_lettered(self, reason: str) -> None:
        events_dead_lettered.labels(*self._labels, reason).inc()


# (the exactly-once commits, restores and sweeps are counted by the layer itself: faust_eos/metrics.py)

# -- worker state, computed on scrape ---------------------------------------------------
def consumer_lags(stable: Mapping[TP, int], positions: Mapping[TP, Optional[int]]) -> dict[TP, int]:
    """Records a ``read_committed`` reader at ``positions`` has yet to read: LSO minus position."""
    return {tp: max(stable[tp] - pos, 0) for tp, pos in positions.items() if pos is not None and tp in stable}


def lso_lags(highwaters: Mapping[TP, int], stable: Mapping[TP, int]) -> dict[TP, int]:
    """Records held back from ``read_committed`` readers by open transactions: high watermark minus LSO."""
    return {tp: max(highwaters[tp] - stable[tp], 0) for tp in highwaters.keys() & stable.keys()}


def not_ready_reason(*, recovered: bool, in_recovery: bool, rebalancing: bool, source_partitions: int) -> Optional[str]:
    """Why a worker cannot serve yet, or None once it can."""
    if rebalancing:
        return "rebalancing: partitions are being reassigned"
    if in_recovery or not recovered:
        return "recovering: tables are being restored from their changelogs"
    if source_partitions == 0:
        return "no partitions assigned"
    return None


class Snapshot(NamedTuple):
    consumer_lag: dict[TP, int]
    lso_lag: dict[TP, int]
    last_stable: dict[TP, int]
    table_keys: dict[tuple[str, int], int]
    recovery_remaining: dict[tuple[str, int, str], int]
    partitions: dict[str, int]
    in_recovery: bool
    ready: bool


class WorkerCollector(Collector):
    """Yields the gauges of the last :func:`refresh`."""

    def __init__(self) -> None:
        self.snapshot: Optional[Snapshot] = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.snapshot
        if snap is None:
            return
        yield _tp_gauge("consumer_lag_records",
                        "Records after the consumer position up to the LSO, per input partition",
                        snap.consumer_lag)
        yield _tp_gauge("lso_lag_records", "High watermark minus last stable offset: records held back by open "
                        "transactions", snap.lso_lag)
        yield _tp_gauge("last_stable_offset", "Last stable offset (LSO): it stands still while a transaction hangs",
                        snap.last_stable)
        keys = GaugeMetricFamily(f"{PREFIX}_table_keys", "Keys in a table partition held by this worker",
                                 labels=["table", "partition"])
        for (table, partition), n in sorted(snap.table_keys.items()):
            keys.add_metric([table, str(partition)], n)
        yield keys
        remaining = GaugeMetricFamily(f"{PREFIX}_recovery_remaining_records",
                                      "Changelog records still to restore, per table partition",
                                      labels=["table", "partition", "kind"])
        for (table, partition, kind), n in sorted(snap.recovery_remaining.items()):
            remaining.add_metric([table, str(partition), kind], n)
        yield remaining
        assigned = GaugeMetricFamily(f"{PREFIX}_partitions_assigned", "Partitions assigned to this worker, by kind",
                                     labels=["kind"])
        for kind, n in sorted(snap.partitions.items()):
            assigned.add_metric([kind], n)
        yield assigned
        yield GaugeMetricFamily(f"{PREFIX}_recovery_in_progress", "1 while tables are being restored",
                                value=int(snap.in_recovery))
        yield GaugeMetricFamily(f"{PREFIX}_ready", "1 when the worker serves: tables restored, partitions assigned",
                                value=int(snap.ready))


def _tp_gauge(name: str, doc: str, values: Mapping[TP, int]) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=["topic", "partition"])
    for tp, n in sorted(values.items()):
        gauge.add_metric([tp.topic, str(tp.partition)], n)
    return gauge


collector = WorkerCollector()
REGISTRY.register(collector)
# (librdkafka's admin client is not used in workers: its requests crashed the process around broker restarts)
_offset_reader: Optional[WatermarkReader] = None


def readiness(app: Any) -> Optional[str]:
    """Why ``app``'s worker is not ready, or None if it is."""
    recovery = app.tables.recovery
    return not_ready_reason(
        recovered=recovery.completed.is_set(),
        in_recovery=recovery.in_recovery,
        rebalancing=app.rebalancing,
        source_partitions=len(_source_partitions(app)),
    )


async def refresh(app: Any) -> None:
    """Recompute the scrape-time gauges of ``app``'s worker."""
    sources = _source_partitions(app)
    recovery = app.tables.recovery
    outputs = {TP(topic, p) for topic in settings.output_topics for p in range(settings.partitions)}
    watched = sources | set(recovery.active_tps) | outputs
    loop = asyncio.get_running_loop()
    try:
        offsets = await asyncio.wait_for(loop.run_in_executor(None, _read_offsets, watched), 2 * SCRAPE_TIMEOUT_S)
    except (asyncio.TimeoutError, KafkaException) as exc:
        log.warning("Metrics: could not read offsets from the broker: %r", exc)
        offsets = {}
    stable = {tp: o.last_stable_offset for tp, o in offsets.items()}
    highwaters = {tp: o.high_watermark for tp, o in offsets.items()}
    positions = await _positions(app, sources)
    table_keys = await loop.run_in_executor(None, _table_keys, list(app.tables.values()))
    collector.snapshot = Snapshot(
        consumer_lag=consumer_lags(stable, positions),
        lso_lag=lso_lags(highwaters, stable),
        last_stable={tp: stable[tp] for tp in highwaters.keys() & stable.keys()},
        table_keys=table_keys,
        recovery_remaining=_recovery_remaining(app),
        partitions={
            "source": len(sources),
            "changelog_active": len(recovery.active_tps),
            "changelog_standby": len(recovery.standby_tps),
        },
        in_recovery=recovery.in_recovery,
        ready=readiness(app) is None,
    )


def _source_partitions(app: Any) -> set[TP]:
    """Input partitions assigned to this worker (none while its consumer is still starting)."""
    changelog_topics = app.tables.changelog_topics
    try:
        assignment = app.consumer.assignment()
    except ConsumerNotStarted:
        return set()
    return {tp for tp in assignment if tp.topic not in changelog_topics}


def _read_offsets(tps: Iterable[TP]) -> dict[TP, PartitionOffsets]:
    """LSO and high watermark of ``tps`` that answered (:func:`kafka_ops.offsets.read_offsets`)."""
    global _offset_reader
    if _offset_reader is None:
        _offset_reader = WatermarkReader(settings.kafka_client(), f"{settings.app_id}-metrics")
    return {TP(*key): offsets for key, offsets in read_offsets(_offset_reader, tps).items()}


async def _positions(app: Any, tps: Iterable[TP]) -> dict[TP, Optional[int]]:
    async def position(tp: TP) -> Optional[int]:
        try:
            return await asyncio.wait_for(app.consumer.position(tp), SCRAPE_TIMEOUT_S)
        except Exception:  # revoked meanwhile, or no position yet
            return None

    tps = sorted(tps)
    return dict(zip(tps, await asyncio.gather(*(position(tp) for tp in tps))))


def _table_keys(tables: list[Any]) -> dict[tuple[str, int], int]:
    sizes: dict[tuple[str, int], int] = {}
    for table in tables:
        if isinstance(table.data, Store):
            sizes.update({(table.name, p): n for p, n in table.data.committed_key_counts().items()})
    return sizes


def _recovery_remaining(app: Any) -> dict[tuple[str, int, str], int]:
    recovery = app.tables.recovery
    by_changelog = {table.changelog_topic.get_topic_name(): table.name for table in app.tables.values()}
    remaining: dict[tuple[str, int, str], int] = {}
    for kind, counts in (("active", recovery.active_remaining()), ("standby", recovery.standby_remaining())):
        for tp, n in counts.items():
            if tp.topic in by_changelog:
                remaining[(by_changelog[tp.topic], tp.partition, kind)] = max(n, 0)
    return remaining
