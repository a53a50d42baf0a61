"""Load generator: payment events for the ``payments`` topic.

Deterministic from a seed: the same seed gives the same event ids, merchants,
customers, amounts, duplicates and bad records, in the same order (only ``ts``,
the creation time, differs). Upstream behaviour it imitates:

* duplicates: an earlier event re-sent unchanged (a producer retry);
* bad records: not JSON, a missing or ill-typed field, a negative or absurd
  amount, an oversized record, or a conflict (an earlier event_id re-sent with
  another amount).
"""
from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, NamedTuple

from confluent_kafka import Producer

from app.kafka import ensure_topics, producer_config
from config import Settings

BAD_KINDS = ("not_json", "missing_field", "wrong_type", "negative_amount", "absurd_amount", "oversized", "conflict")


@dataclass(frozen=True)
class LoadSpec:
    count: int = 10_000  # records to produce, duplicates and bad records included
    rate: float = 0.0  # records per second; 0 = as fast as possible
    seed: int = 1
    merchants: int = 20
    customers: int = 1_000
    duplicate_rate: float = 0.05
    bad_rate: float = 0.02
    record_bytes: int = 0  # pad each event with a "pad" field to about this many bytes; 0 = no padding

    def __post_init__(self) -> None:
        if self.count < 0 or self.rate < 0 or self.merchants < 1 or self.customers < 1:
            raise ValueError("count and rate must be >= 0, merchants and customers >= 1")
        if self.record_bytes < 0:
            raise ValueError("record_bytes must be >= 0")
        if not (0 <= self.duplicate_rate <= 1 and 0 <= self.bad_rate <= 1 and self.duplicate_rate + self.bad_rate <= 1):
            raise ValueError("duplicate_rate and bad_rate must be within 0..1 and add up to at most 1")


class Record(NamedTuple):
    key: bytes
    value: bytes
    kind: str  # "valid", "duplicate" or one of BAD_KINDS


@dataclass
class LoadSummary:
    produced: int = 0
    by_kind: Counter = field(default_factory=Counter)
    elapsed_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.produced / self.elapsed_s if self.elapsed_s else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "by_kind": dict(self.by_kind), "rate": round(self.rate, 1)}


def generate(spec: LoadSpec, clock: Callable[[], float] = time.time) -> Iterator[Record]:
    """The records of ``spec``, in order."""
    rng = random.Random(spec.seed)
    sent: list[tuple[bytes, dict]] = []  # valid events so far, for duplicates and conflicts
    for i in range(spec.count):
        roll = rng.random()
        if sent and roll < spec.duplicate_rate:
            key, event = sent[rng.randrange(len(sent))]
            yield Record(key, _encode(event), "duplicate")
        elif roll < spec.duplicate_rate + spec.bad_rate:
            kind = rng.choice(BAD_KINDS)
            yield _bad_record(kind, rng, sent, spec, i, clock)
        else:
            key, event = _new_event(rng, spec, i, clock)
            sent.append((key, event))
            yield Record(key, _encode(event), "valid")


def _new_event(rng: random.Random, spec: LoadSpec, i: int, clock: Callable[[], float]) -> tuple[bytes, dict]:
    customer = f"c{rng.randrange(spec.customers):05d}"
    event = {
        "event_id": f"{spec.seed}-{i:09d}",
        "merchant_id": f"m{rng.randrange(spec.merchants):03d}",
        "customer_id": customer,
        "amount_cents": rng.randint(1, 500_000),
        "ts": round(clock(), 3),
    }
    if spec.record_bytes:
        padding = spec.record_bytes - len(_encode(event)) - len(',"pad":""')
        event["pad"] = "x" * max(padding, 0)
    return customer.encode(), event


def _bad_record(kind: str, rng: random.Random, sent: list, spec: LoadSpec, i: int, clock) -> Record:
    key, event = _new_event(rng, spec, i, clock)
    if kind == "conflict" and sent:
        key, original = sent[rng.randrange(len(sent))]
        return Record(key, _encode({**original, "amount_cents": original["amount_cents"] + 1}), kind)
    if kind == "missing_field":  # one of the payment's own fields: an event without its padding is whole
        del event[rng.choice([name for name in event if name != "pad"])]
    elif kind == "wrong_type":
        event["amount_cents"] = str(event["amount_cents"])
    elif kind == "negative_amount":
        event["amount_cents"] = -event["amount_cents"]
    elif kind == "absurd_amount":
        event["amount_cents"] = 10**15
    elif kind == "oversized":
        event["note"] = "x" * 10_000
    else:  # not_json, or a conflict with nothing to conflict with yet
        return Record(key, b"{not json " + str(i).encode(), "not_json")
    return Record(key, _encode(event), kind)


def _encode(event: dict) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()


def produce(spec: LoadSpec, settings: Settings, *, progress: bool = True) -> LoadSummary:
    """Produce ``spec`` to the input topic; blocks until every record is acknowledged."""
    ensure_topics(settings)
    producer = Producer(producer_config(settings))
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(err.str())

    summary = LoadSummary()
    started = last_report = time.monotonic()
    for record in generate(spec):
        while True:
            try:
                producer.produce(settings.input_topic, key=record.key, value=record.value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        summary.produced += 1
        summary.by_kind[record.kind] += 1
        now = time.monotonic()
        if spec.rate:
            ahead = summary.produced / spec.rate - (now - started)
            if ahead > 0:
                time.sleep(ahead)
        if progress and now - last_report >= 0.5:
            last_report = now
            _report(summary.produced, spec.count, now - started)
    remaining = producer.flush(60)
    summary.elapsed_s = time.monotonic() - started
    if progress:
        _report(summary.produced, spec.count, summary.elapsed_s, end="\n")
    if errors or remaining:
        raise RuntimeError(f"{len(errors) + remaining} records not acknowledged: {errors[:3]}")
    return summary


def _report(done: int, total: int, elapsed: float, end: str = "") -> None:
    rate = done / elapsed if elapsed else 0.0
    eta = (total - done) / rate if rate else 0.0
    sys.stderr.write(f"\rproduced {done:,}/{total:,} records, {rate:,.0f}/s, {eta:,.0f} s left   {end}")
    sys.stderr.flush()
