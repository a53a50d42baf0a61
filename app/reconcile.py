"""Reconcile: recompute what the pipeline must have written, compare with what it did.

Read-only and repeatable. From the committed input alone it recomputes, with
the pipeline's own validation and dedup rules, which events count, which are
duplicates and which are dead letters; then it checks the committed outputs:

* ``merchant-totals``: per merchant, updates count 1, 2, 3, ... with no repeat
  and no gap, each adding exactly its event's amount, every counted event
  exactly once, final totals equal to the recomputation;
* ``merchant-windows``: the same per merchant and window, for every counted
  event that was not late;
* ``payments-dlq``: exactly the bad input records, with their reason and bytes,
  and the late ``payments-by-merchant`` records.

Which events are late depends on the order they reached ``payments-by-merchant``
(stream time is the largest event time seen on each of its partitions), so that
topic is replayed in order with the pipeline's rule.

Run it once the pipeline has drained (``--wait`` re-checks until then).
"""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple, Optional

from confluent_kafka import Consumer, KafkaError, TopicPartition

from agents.logic import Verdict, advance_stream_time, dedup_verdict, is_late, seen_entry, window_start
from agents.models import Payment, SeenEvent
from agents.validation import Reason, Rejection, parse_payment
from config import Settings
from kafka_ops.records import END_READER_FETCH_WAIT_MS, ready_records

EXAMPLES = 5  # how many examples of each problem the report keeps
#: header of the marker records the fault harness writes at the end of a run; not pipeline output
SENTINEL_HEADER = "faust-eos-sentinel"


class Rec(NamedTuple):
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: dict[str, bytes]
    timestamp_ms: int = 0


def read_committed(settings: Settings, topic: str, timeout_s: float = 60.0) -> list[Rec]:
    """Every committed record of ``topic``, in partition then offset order."""
    consumer = Consumer({
        **settings.kafka_client(),
        "group.id": f"{settings.app_id}-reconcile",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": END_READER_FETCH_WAIT_MS,
    })
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        if metadata.error is not None:
            return []
        partitions = sorted(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # 0 = from the start
        pending = set(partitions)
        records: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {sorted(pending)} did not reach their end")
            for msg in ready_records(consumer, timeout=0.5):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise RuntimeError(f"reading {topic}: {msg.error().str()}")
                headers = {k: v for k, v in (msg.headers() or [])}
                if msg.partition() in pending and SENTINEL_HEADER not in headers:
                    records.append(
                        Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1])
                    )
        records.sort(key=lambda r: (r.partition, r.offset))
        return records
    finally:
        consumer.close()


@dataclass
class Expectation:
    """What the pipeline must produce for a given input."""

    inputs: int = 0
    counted: dict[str, Payment] = field(default_factory=dict)  # event_id -> payment
    duplicates: int = 0
    dead: dict[tuple[int, int], tuple[Reason, Optional[bytes]]] = field(default_factory=dict)
    #: event_ids seen in more than one input partition: dedup (per partition) cannot catch their repeats
    split_event_ids: dict[str, set[int]] = field(default_factory=dict)
    #: (partition, offset) of each late ``payments-by-merchant`` record -> (event_id, its bytes)
    late: dict[tuple[int, int], tuple[str, Optional[bytes]]] = field(default_factory=dict)

    def counted_in_windows(self) -> dict[str, Payment]:
        """The counted events that were not late: each must update its window."""
        late = {event_id for event_id, _ in self.late.values()}
        return {event_id: p for event_id, p in self.counted.items() if event_id not in late}


def expect(inputs: Iterable[Rec], settings: Settings) -> Expectation:
    """Replay the pipeline's rules over the input (dedup state is per partition, like the table)."""
    expectation = Expectation()
    seen: dict[int, dict[str, SeenEvent]] = defaultdict(dict)
    retention_s = settings.dedup_retention_days * 86_400
    for rec in inputs:
        expectation.inputs += 1
        result = parse_payment(rec.value, max_bytes=settings.max_event_bytes,
                               max_amount_cents=settings.max_amount_cents)
        if isinstance(result, Rejection):
            expectation.dead[(rec.partition, rec.offset)] = (result.reason, rec.value)
            continue
        # the input's own timestamps stand in for processing time: reconcile
        # assumes the input spans less than the dedup retention
        verdict = dedup_verdict(seen[rec.partition].get(result.event_id), result, result.ts, retention_s)
        if verdict is Verdict.NEW:
            seen[rec.partition][result.event_id] = seen_entry(result, result.ts)
            other_partitions = {p for p in seen if p != rec.partition and result.event_id in seen[p]}
            if other_partitions:
                expectation.split_event_ids[result.event_id] = other_partitions | {rec.partition}
            expectation.counted[result.event_id] = result
        elif verdict is Verdict.DUPLICATE:
            expectation.duplicates += 1
        else:
            expectation.dead[(rec.partition, rec.offset)] = (Reason.CONFLICT, rec.value)
    return expectation


def find_late(by_merchant: Iterable[Rec], settings: Settings) -> dict[tuple[int, int], tuple[str, Optional[bytes]]]:
    """Replay stream time over ``payments-by-merchant`` (in partition, offset order): the late records."""
    late = {}
    stream_times: dict[int, float] = {}
    for rec in by_merchant:
        payment = json.loads(rec.value)
        stream_time = advance_stream_time(stream_times.get(rec.partition), payment["ts"])
        stream_times[rec.partition] = stream_time
        if is_late(payment["ts"], stream_time, settings.window_seconds, settings.window_grace_seconds):
            late[(rec.partition, rec.offset)] = (payment["event_id"], rec.value)
    return late


class Problems:
    """Problems found, counted by kind, with a few examples of each."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)

    def as_dict(self) -> dict[str, Any]:
        return {kind: {"count": n, "examples": self.examples[kind]} for kind, n in sorted(self.counts.items())}


def check_update_stream(
    updates: Iterable[tuple[str, dict]],
    counted: dict[str, Payment],
    problems: Problems,
    *,
    what: str,
    group_of: Callable[[Payment], str],
) -> dict[str, tuple[int, int]]:
    """Check per-group update streams; return each group's final (count, amount).

    ``updates`` yields (group, value) in the order a reader sees them, where a
    value has ``count``, ``amount_cents`` and ``event_id``; ``counted``: the
    events that must each update their group once; ``group_of`` names the group.
    """
    last: dict[str, tuple[int, int]] = {}
    seen_events: set[tuple[str, str]] = set()
    for group, value in updates:
        count, amount = last.get(group, (0, 0))
        payment = counted.get(value["event_id"])
        if (group, value["event_id"]) in seen_events:
            problems.add(f"{what}: duplicate update", f"{group}: event {value['event_id']} applied again")
        elif payment is None:
            problems.add(f"{what}: unknown event", f"{group}: event {value['event_id']} is not a counted event")
        seen_events.add((group, value["event_id"]))
        if value["count"] != count + 1:
            problems.add(f"{what}: count out of sequence", f"{group}: count {value['count']} after {count}")
        elif payment is not None and value["amount_cents"] != amount + payment.amount_cents:
            problems.add(
                f"{what}: wrong running sum",
                f"{group}: {value['amount_cents']} after {amount} + {payment.amount_cents}",
            )
        last[group] = (value["count"], value["amount_cents"])
    for event_id, payment in counted.items():
        if (group_of(payment), event_id) not in seen_events:
            problems.add(f"{what}: lost event", f"{group_of(payment)}: event {event_id} never applied")
    return last


def compare_finals(
    actual: dict[str, tuple[int, int]], expected: dict[str, tuple[int, int]], problems: Problems, *, what: str
) -> None:
    for group in sorted(set(actual) | set(expected)):
        got, want = actual.get(group, (0, 0)), expected.get(group, (0, 0))
        if got != want:
            kind = "missing updates" if got[0] < want[0] else "wrong final total"
            problems.add(f"{what}: {kind}", f"{group}: (count, amount) {got}, expected {want}")


def reconcile(settings: Settings) -> dict[str, Any]:
    """Read input and outputs, compare, and return the report (``report['ok']``)."""
    started = time.monotonic()
    expectation = expect(read_committed(settings, settings.input_topic), settings)
    expectation.late = find_late(read_committed(settings, settings.by_merchant_topic), settings)
    problems = Problems()
    for event_id, partitions in expectation.split_event_ids.items():
        problems.add(
            "input: event_id in several partitions",
            f"{event_id} in partitions {sorted(partitions)}: key payments by customer_id so repeats meet",
        )

    expected_totals: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
    expected_windows: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
    def window_of(payment: Payment) -> str:
        return f"{payment.merchant_id}@{window_start(payment.ts, settings.window_seconds):.0f}"

    in_windows = expectation.counted_in_windows()
    for payment in expectation.counted.values():
        count, amount = expected_totals[payment.merchant_id]
        expected_totals[payment.merchant_id] = (count + 1, amount + payment.amount_cents)
    for payment in in_windows.values():
        window = window_of(payment)
        count, amount = expected_windows[window]
        expected_windows[window] = (count + 1, amount + payment.amount_cents)

    total_records = read_committed(settings, settings.totals_topic)
    totals = [json.loads(r.value) for r in total_records]
    final_totals = check_update_stream(
        ((t["merchant_id"], t) for t in totals),
        expectation.counted,
        problems,
        what="totals",
        group_of=lambda payment: payment.merchant_id,
    )
    compare_finals(final_totals, expected_totals, problems, what="totals")

    windows = [json.loads(r.value) for r in read_committed(settings, settings.windows_topic)]
    window_updates = ((f"{w['merchant_id']}@{w['window_start']:.0f}", w) for w in windows)
    final_windows = check_update_stream(window_updates, in_windows, problems, what="windows", group_of=window_of)
    compare_finals(final_windows, expected_windows, problems, what="windows")

    dead_letters = read_committed(settings, settings.dlq_topic)
    check_dead_letters(dead_letters, expectation, settings, problems)

    return {
        "ok": not problems.counts,
        "input_records": expectation.inputs,
        "counted_events": len(expectation.counted),
        "upstream_duplicates": expectation.duplicates,
        "expected_dead_letters": len(expectation.dead) + len(expectation.late),
        "late_events": len(expectation.late),
        "dead_letters": len(dead_letters),
        "total_updates": len(totals),
        "window_updates": len(windows),
        "merchants": len(expected_totals),
        "output_span_s": _span_s(total_records),
        "final_totals": {m: {"count": c, "amount_cents": a} for m, (c, a) in sorted(final_totals.items())},
        "expected_totals": {m: {"count": c, "amount_cents": a} for m, (c, a) in sorted(expected_totals.items())},
        "problems": problems.as_dict(),
        "seconds": round(time.monotonic() - started, 2),
    }


def _span_s(records: list[Rec]) -> float:
    """Seconds between the first and last record's broker timestamps."""
    stamps = [r.timestamp_ms for r in records if r.timestamp_ms > 0]
    return (max(stamps) - min(stamps)) / 1000 if stamps else 0.0


def check_dead_letters(dead_letters: list[Rec], expectation: Expectation, settings: Settings,
                       problems: Problems) -> None:
    """Every expected dead letter exactly once, with its reason and its source record's bytes."""
    expected = {(settings.input_topic, *source): want for source, want in expectation.dead.items()}
    expected.update({(settings.by_merchant_topic, *source): (Reason.LATE, value)
                     for source, (_, value) in expectation.late.items()})
    found: Counter[tuple[str, int, int]] = Counter()
    for rec in dead_letters:
        try:
            source = (rec.headers["dlq.source.topic"].decode(), int(rec.headers["dlq.source.partition"]),
                      int(rec.headers["dlq.source.offset"]))
            reason = Reason(rec.headers["dlq.reason"].decode())
        except (KeyError, ValueError):
            problems.add("dlq: malformed", f"dlq[{rec.partition}]@{rec.offset}: headers {sorted(rec.headers)}")
            continue
        found[source] += 1
        if found[source] > 1:
            problems.add("dlq: duplicate", f"{_source_text(source)} dead-lettered {found[source]} times")
        elif source not in expected:
            problems.add("dlq: unexpected", f"{_source_text(source)} ({reason.value}) should not be a dead letter")
        else:
            want_reason, want_value = expected[source]
            if reason is not want_reason:
                problems.add("dlq: wrong reason",
                             f"{_source_text(source)}: {reason.value}, expected {want_reason.value}")
            if rec.value != want_value:
                problems.add("dlq: bytes changed", f"{_source_text(source)}: value differs from the source record")
    for source, (reason, _) in expected.items():
        if source not in found:
            problems.add("dlq: missing", f"{_source_text(source)} ({reason.value}) never reached the dead-letter topic")


def _source_text(source: tuple[str, int, int]) -> str:
    topic, partition, offset = source
    return f"{topic}[{partition}]@{offset}"


def reconcile_until_settled(settings: Settings, wait_s: float, on_retry=None) -> dict[str, Any]:
    """Reconcile, re-checking for up to ``wait_s`` seconds while outputs still catch up."""
    deadline = time.monotonic() + wait_s
    while True:
        report = reconcile(settings)
        if report["ok"] or time.monotonic() >= deadline:
            return report
        if on_retry is not None:
            on_retry(report)
        time.sleep(1.0)


def summary(report: dict[str, Any]) -> str:
    """A readable summary of a report."""
    lines = [
        f"input records       {report['input_records']:>10,}",
        f"counted events      {report['counted_events']:>10,}",
        f"upstream duplicates {report['upstream_duplicates']:>10,}",
        f"dead letters        {report['dead_letters']:>10,}  (expected {report['expected_dead_letters']:,})",
        f"late events         {report['late_events']:>10,}  (dead-lettered, left out of their windows)",
        f"total updates       {report['total_updates']:>10,}  across {report['merchants']} merchants",
        f"window updates      {report['window_updates']:>10,}",
    ]
    if report["ok"]:
        lines.append("RECONCILE OK: outputs match the input exactly")
    else:
        lines.append("RECONCILE FAILED:")
        for kind, problem in report["problems"].items():
            lines.append(f"  {kind}: {problem['count']}")
            lines.extend(f"      e.g. {example}" for example in problem["examples"])
    return "\n".join(lines)
