"""The long-transaction scenario: one open transaction holds back every read_committed reader.

While the pipeline runs under exactly_once with a steady load, a separate
transactional producer writes one record to partition 0 of the totals topic
and stalls without committing. The LSO of that partition stays at the stalled
record while the pipeline keeps appending behind it; read_committed readers
of that partition receive nothing. The project's own transaction operations
(:mod:`kafka_ops.transactions`, behind ``faust -A app transactions``,
``hanging-transactions`` and ``lso``) look at it while it happens. The lag
clears either when the broker aborts the transaction at its
``transaction.timeout.ms`` (``mode="timeout"``), or at once when an operator
aborts it by hand with ``abort-transaction --topic --partition``
(``mode="manual"``).
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from app import loadgen
from app.kafka import producer_config
from app.reconcile import SENTINEL_HEADER
from benchmarks.measure import LsoSampler, OutputWatcher
from benchmarks.pipeline import clean_up, warm_up
from config import Settings
from kafka_ops import transactions as txn
from kafka_ops.wire import Cluster, KafkaWireError
from tools.run import PipelineRun

#: how often the broker looks for timed-out transactions (its default; the local broker keeps it)
ABORT_CHECK_INTERVAL_S = 10.0


@dataclass(frozen=True)
class Scenario:
    mode: str  # "timeout" or "manual"
    partitions: int = 6
    rate: float = 200.0  # pipeline load, events/s
    stall_after_s: float = 5.0  # load time before the stall
    stall_timeout_ms: int = 20_000  # transaction.timeout.ms of the stalling producer
    detect_after_s: float = 3.0  # stall time before the operator looks at the transactions
    abort_after_s: float = 8.0  # stall time before the manual abort
    tail_s: float = 5.0  # load time after the lag cleared
    sample_interval_s: float = 0.25


def operation(settings: Settings, command: str, run: Callable[[Cluster, AdminClient], str]) -> dict:
    """Run one transaction operation as ``faust -A app <command>`` does; return the command, its output and status."""
    started = time.time()
    try:
        cluster, admin = txn.connect(settings.kafka_client())
        with cluster:
            output, exit_code = run(cluster, admin), 0
    except (txn.TransactionToolError, KafkaWireError) as exc:
        output, exit_code = f"error: {exc}", 1
    return {"command": f"faust -A app {command}", "at": started, "exit_code": exit_code, "output": output}


def text_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """``rows`` under ``headers``, columns aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in (headers, *rows))


def look_at_transactions(settings: Settings, topic: str) -> list[dict]:
    """What an operator sees of the stalled transaction: open transactions, what holds the LSO, the LSO.

    The ``transactions`` output is cut to those writing to ``topic``: the cluster may be shared.
    """
    def open_transactions(cluster: Cluster, admin: AdminClient) -> str:
        found = [t for t in txn.list_transactions(cluster) if any(name == topic for name, _ in t.partitions)]
        return text_table(txn.TRANSACTION_HEADERS, txn.transaction_rows(found, int(time.time() * 1000)))

    def blocking(cluster: Cluster, admin: AdminClient) -> str:
        found = txn.find_hanging(cluster, admin, [topic], blocking=True)
        return text_table(txn.HANGING_HEADERS, txn.hanging_rows(found, int(time.time() * 1000)))

    def stable_offsets(cluster: Cluster, admin: AdminClient) -> str:
        return text_table(txn.LSO_HEADERS, txn.lso_table(cluster, admin, [topic]))

    return [operation(settings, "transactions", open_transactions),
            operation(settings, f"hanging-transactions --topic {topic} --blocking", blocking),
            operation(settings, f"lso {topic}", stable_offsets)]


def abort_by_hand(settings: Settings, topic: str, partition: int, start_offset: int) -> dict:
    """``abort-transaction --topic --partition --producer-id`` for the open transaction from ``start_offset``.

    The pipeline's own transactions may be open on the partition too: the
    producer is the one ``hanging-transactions`` shows holding the LSO there.
    """
    cluster, admin = txn.connect(settings.kafka_client())
    with cluster:
        leaders = txn.topic_leaders(admin, [topic])
        producers = txn.describe_producers(cluster, {(topic, partition): leaders[(topic, partition)]})
    producer_id = next(p.producer_id for p in producers if p.txn_start_offset == start_offset)

    def abort(cluster: Cluster, admin: AdminClient) -> str:
        return txn.abort_marker_written(txn.abort_on_partition(cluster, admin, topic, partition, producer_id))

    return operation(settings, f"abort-transaction --topic {topic} --partition {partition} "
                               f"--producer-id {producer_id} --yes", abort)


def run_scenario(scenario: Scenario, work_dir: Path, progress: Callable[[str], None], seed: int = 1) -> dict:
    name = f"bench-ltx-{uuid.uuid4().hex[:6]}"
    run = PipelineRun(name, work_dir / name, guarantee="exactly_once", COMMIT_INTERVAL_MS="100",
                      PARTITIONS=str(scenario.partitions))
    settings = run.settings
    topic = settings.totals_topic
    watcher = OutputWatcher(settings, topic)
    sampler = LsoSampler(settings, topic, scenario.partitions, scenario.sample_interval_s)
    watcher.start()
    staller: Optional[Producer] = None
    commands: list[dict] = []
    try:
        run.add_worker()
        restarted = warm_up(run, watcher, seed * 10 + 1, 300, 0, 300.0, progress)
        sampler.start()
        limit_s = scenario.stall_after_s + scenario.stall_timeout_ms / 1000 + ABORT_CHECK_INTERVAL_S + 30
        spec = loadgen.LoadSpec(count=int(scenario.rate * limit_s), rate=scenario.rate, seed=seed * 10 + 4)
        stop_load = threading.Event()
        load_thread = threading.Thread(target=_produce_until, args=(settings, spec, stop_load), daemon=True)
        started = time.time()
        load_thread.start()
        progress(f"long transaction ({scenario.mode}): pipeline under load, stalling in {scenario.stall_after_s:.0f} s")
        time.sleep(scenario.stall_after_s)

        staller = Producer({**settings.kafka_client(), "transactional.id": f"{name}-stalled",
                            "transaction.timeout.ms": scenario.stall_timeout_ms, "enable.idempotence": True})
        staller.init_transactions(30)
        staller.begin_transaction()
        delivered: list = []
        staller.produce(topic, key=b"stalled", value=b'{"stalled": true}', partition=0,
                        headers=[(SENTINEL_HEADER, b"stalled transaction")],
                        on_delivery=lambda err, msg: delivered.append((err, msg)))
        staller.flush(30)
        stalled_at = time.time()
        err, msg = delivered[0]
        if err is not None:
            raise RuntimeError(f"stalling producer: {err.str()}")
        stalled_offset = msg.offset()
        progress(f"long transaction ({scenario.mode}): open at offset {stalled_offset} of {topic}[0], stalling")

        time.sleep(scenario.detect_after_s)
        progress(f"long transaction ({scenario.mode}): transactions / hanging-transactions / lso")
        commands.extend(look_at_transactions(settings, topic))

        aborted_at: Optional[float] = None
        if scenario.mode == "manual":
            time.sleep(max(0.0, stalled_at + scenario.abort_after_s - time.time()))
            progress("long transaction (manual): aborting by hand")
            abort = abort_by_hand(settings, topic, 0, stalled_offset)
            aborted_at = abort["at"]
            abort["seconds"] = time.time() - aborted_at
            commands.append(abort)
        limit = stalled_at + scenario.stall_timeout_ms / 1000 + ABORT_CHECK_INTERVAL_S + 20
        cleared_at = _wait_cleared(sampler, stalled_offset, stalled_at, limit, progress, scenario.mode)
        time.sleep(scenario.tail_s)
        stop_load.set()
        load_thread.join(60)
        sent = getattr(load_thread, "summary", None)
        progress(f"long transaction ({scenario.mode}): waiting for the pipeline to drain")
        if sent is not None:
            watcher.wait_for_seed(spec.seed, sent.by_kind["valid"], 120)
        sampler.stop()
    except BaseException:
        sampler.stop()
        watcher.stop()
        run.stop_all()
        raise
    finally:
        if staller is not None:
            staller.flush(0)
    run.stop_all()
    reconciled = run.reconcile(wait_s=60)
    watcher.stop()
    result = _analyse(scenario, sampler, watcher, started, stalled_at, stalled_offset, aborted_at, cleared_at)
    result.update({
        "commands": commands,
        "counts": {"visible_events": len(watcher.visible_at), "visible_updates": watcher.records,
                   "reconcile_counted_events": reconciled["counted_events"],
                   "reconcile_total_updates": reconciled["total_updates"],
                   "match": len(watcher.visible_at) == reconciled["counted_events"]
                   and watcher.records == reconciled["total_updates"]},
        "reconcile_ok": reconciled["ok"],
        "restarted_workers": restarted,
    })
    clean_up(run)
    return result


def _produce_until(settings: Settings, spec: loadgen.LoadSpec, stop: threading.Event) -> None:
    """Produce ``spec`` at its rate, stopping early when ``stop`` is set; the summary lands on the thread."""
    producer = Producer(producer_config(settings))
    summary = loadgen.LoadSummary()
    started = time.monotonic()
    for record in loadgen.generate(spec):
        if stop.is_set():
            break
        producer.produce(settings.input_topic, key=record.key, value=record.value)
        producer.poll(0)
        summary.produced += 1
        summary.by_kind[record.kind] += 1
        ahead = summary.produced / spec.rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(60)
    summary.elapsed_s = time.monotonic() - started
    threading.current_thread().summary = summary  # type: ignore[attr-defined]


def _wait_cleared(sampler: LsoSampler, offset: int, since: float, limit: float, progress, mode: str) -> Optional[float]:
    """Time of the first LSO sample of partition 0 past ``offset``, or None if none before ``limit``."""
    while time.time() < limit:
        cleared = [s["t"] for s in sampler.samples if s["partition"] == 0 and s["t"] > since and s["lso"] > offset]
        if cleared:
            return cleared[0]
        lag = [s for s in sampler.samples if s["partition"] == 0][-1:]
        if lag:
            progress(f"long transaction ({mode}): partition 0 LSO lag {lag[0]['lag']} records, "
                     f"{lag[0]['lag_ms'] / 1000:.1f} s, stalled {time.time() - since:.0f} s")
        time.sleep(0.2)
    return None


def _analyse(scenario: Scenario, sampler: LsoSampler, watcher: OutputWatcher, started: float, stalled_at: float,
             offset: int, aborted_at: Optional[float], cleared_at: Optional[float]) -> dict:
    """The timeline (seconds from the load's start) and the sanity checks of the measurement."""
    end = cleared_at if cleared_at is not None else time.time()
    p0 = [s for s in sampler.samples if s["partition"] == 0]
    during = [s for s in p0 if stalled_at < s["t"] < end]
    # the first sample after the stall may predate the stalled record's append by a few ms
    pinned = bool(during) and all(s["lso"] == offset for s in during[1:])
    # what the reader got while the LSO was surely pinned: from 1 s after the stall (transactions of
    # the pipeline begun before it may still commit) to the last sample that saw it pinned
    last_pinned = max((s["t"] for s in during if s["lso"] == offset), default=stalled_at)
    p0_arrivals_during = sum(1 for t, p in watcher.arrivals if p == 0 and stalled_at + 1 < t <= last_pinned)
    other_arrivals_during = sum(1 for t, p in watcher.arrivals if p != 0 and stalled_at + 1 < t <= last_pinned)
    behind = max((s["hw"] - offset for s in during), default=0)
    last_bin = int((max((t for t, _ in watcher.arrivals), default=started) - started) / 0.5)
    bins = {(b, p): 0 for b in range(last_bin + 1) for p in range(scenario.partitions)}
    for t, p in watcher.arrivals:
        if t >= started:
            bins[(int((t - started) / 0.5), p)] += 1
    return {
        "mode": scenario.mode,
        "scenario": {k: getattr(scenario, k) for k in scenario.__dataclass_fields__},
        "stalled_offset": offset,
        "stalled_at_s": stalled_at - started,
        "aborted_at_s": aborted_at - started if aborted_at else None,
        "cleared_at_s": cleared_at - started if cleared_at else None,
        "lag_lasted_s": (cleared_at - stalled_at) if cleared_at else None,
        "cleared_after_abort_s": (cleared_at - aborted_at) if cleared_at and aborted_at else None,
        "reader_records_during_stall": {"partition_0": p0_arrivals_during, "other_partitions": other_arrivals_during},
        "max_lag_records": max((s["lag"] for s in during), default=0),
        "max_lag_ms": max((s["lag_ms"] for s in during), default=0),
        "sanity": {
            "lso_pinned_at_stalled_record": pinned,
            "pipeline_kept_writing_behind_it": behind > 1,
            "reader_got_nothing_from_partition_0": p0_arrivals_during == 0,
            "reader_got_other_partitions": other_arrivals_during > 0,
            "cleared": cleared_at is not None,
            "cleared_by_timeout_in_window": None if aborted_at or not cleared_at else
            scenario.stall_timeout_ms / 1000 <= cleared_at - stalled_at
            <= scenario.stall_timeout_ms / 1000 + ABORT_CHECK_INTERVAL_S + 2 * scenario.sample_interval_s + 1,
        },
        "timeline": [{**s, "t": s["t"] - started} for s in sampler.samples if s["t"] >= started],
        "reader_arrivals": [{"t": b * 0.5, "partition": p, "records": n} for (b, p), n in sorted(bins.items())],
    }
