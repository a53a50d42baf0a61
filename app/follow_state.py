"""What ``reconcile --follow`` knows between checks: pure logic, no Kafka (see :mod:`app.follow`).

It reads the pipeline's topics as a ``read_committed`` reader sees them, in
rounds. Each input record is judged with the pipeline's own validation and
dedup rules (dedup per input partition; where the pipeline takes the time it
processes a record, this takes the record's timestamp, so the two can differ
only for repeats at the very end of the dedup retention); a valid new event is
then *expected*: one update of its merchant's running total in
``merchant-totals`` (two, if its id is new in two input partitions). Each
update is checked as it is read:

* the update of an expected event must follow its merchant's last update:
  count one more, amount more by the event's amount; else **mismatched**;
* an update of an event already counted, or of no event of the input, is **extra**.

An expected event is **missing** once the pipeline has committed its input
offset past it while it never reached ``payments-by-merchant``, or its
``payments-by-merchant`` offset while its update never came. Judged against
the pipeline group's offsets of the round before, so that the commit markers
of the transaction that moved them have long been written.

Per input partition, the *watermark* is the offset below which every record
has been judged: each valid event counted once and consistently, or reported.
Event ids are remembered for the dedup retention past the newest record
timestamp read, so the state stays bounded however long it follows.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from agents.logic import Verdict, dedup_verdict, seen_entry
from agents.models import SeenEvent
from agents.validation import Rejection, parse_payment

KINDS = ("missing", "extra", "mismatched")
FORMAT = 2  # of the saved state


@dataclass
class Expected:
    """A valid new input event waiting for its update."""

    partition: int
    offset: int
    merchant_id: str
    amount_cents: int
    read_at: float  # the input record's timestamp (s): what the dedup retention counts from
    by_merchant: Optional[tuple[int, int]] = None  # its (partition, offset) in payments-by-merchant, once read


@dataclass(frozen=True)
class Difference:
    kind: str  # one of KINDS
    event_id: str
    merchant_id: str
    detail: str

    def line(self) -> str:
        return f"difference: {self.kind} event {self.event_id} (merchant {self.merchant_id}): {self.detail}"


class FollowState:
    """Positions, dedup memory, expected events, merchants' last totals, watermarks and difference counts."""

    def __init__(self, *, input_topic: str, by_merchant_topic: str, retention_s: float,
                 max_event_bytes: int, max_amount_cents: int) -> None:
        self.input_topic, self.by_merchant_topic = input_topic, by_merchant_topic
        self.retention_s = retention_s
        self._limits = dict(max_bytes=max_event_bytes, max_amount_cents=max_amount_cents)
        #: topic -> partition -> next offset to read
        self.positions: dict[str, dict[int, int]] = {}
        #: input partition -> event_id -> what dedup remembers of it
        self.seen: dict[int, dict[str, SeenEvent]] = {}
        #: event_id -> its expected updates, oldest first (one per input partition it is new in)
        self.expected: dict[str, list[Expected]] = {}
        #: event_id -> when it was read, of events whose update was read (or reported missing)
        self.counted: dict[str, float] = {}
        #: merchant -> (count, amount) of its last update read
        self.totals: dict[str, tuple[int, int]] = {}
        self.differences: Counter[str] = Counter({kind: 0 for kind in KINDS})
        self.checked_events = 0
        self.rounds = 0  # rounds that succeeded, since the state began
        self.newest_read_at = 0.0

    # -- reading ---------------------------------------------------------------
    def read_input(self, partition: int, offset: int, value: Optional[bytes], read_at: float) -> None:
        """Judge one input record; ``read_at``: its timestamp in seconds (no later than now)."""
        payment = parse_payment(value, **self._limits)
        if isinstance(payment, Rejection):
            return  # a dead letter: the full reconcile checks those
        self.newest_read_at = max(self.newest_read_at, read_at)
        seen = self.seen.setdefault(partition, {})
        if dedup_verdict(seen.get(payment.event_id), payment, read_at, self.retention_s) is Verdict.NEW:
            seen[payment.event_id] = seen_entry(payment, read_at)
            self.expected.setdefault(payment.event_id, []).append(
                Expected(partition, offset, payment.merchant_id, payment.amount_cents, read_at))

    def read_by_merchant(self, partition: int, offset: int, value: Optional[bytes]) -> None:
        for expected in self.expected.get(_event_id(value), ()):
            if expected.by_merchant is None:
                expected.by_merchant = (partition, offset)
                return

    def read_total(self, value: Optional[bytes], where: str = "") -> list[Difference]:
        """Check one ``merchant-totals`` update (``where``: its partition and offset, for the report)."""
        try:
            update = json.loads(value)
            merchant, event_id = str(update["merchant_id"]), str(update["event_id"])
            count, amount = int(update["count"]), int(update["amount_cents"])
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            return [self._found("extra", "?", "?", f"the record at {where} is no total update ({exc!r})")]
        last_count, last_amount = self.totals.get(merchant, (0, 0))
        self.totals[merchant] = (count, amount)  # what follows is checked against what the readers saw
        waiting = self.expected.get(event_id)
        if not waiting:
            why = ("counted again" if event_id in self.counted
                   else "no valid new input event has this id")
            return [self._found("extra", event_id, merchant, f"{why} (count {count}, amount {amount})")]
        expected = waiting.pop(0)
        if not waiting:
            del self.expected[event_id]
        self.counted[event_id] = expected.read_at
        self.checked_events += 1
        wrong = []
        if expected.merchant_id != merchant:
            wrong.append(f"counted for merchant {merchant}, the event is {expected.merchant_id}'s")
        if count != last_count + 1:
            wrong.append(f"count {count} after {last_count}")
        if amount != last_amount + expected.amount_cents:
            wrong.append(f"amount {amount} after {last_amount} + {expected.amount_cents}")
        return [self._found("mismatched", event_id, merchant, "; ".join(wrong))] if wrong else []

    def judge_missing(self, committed: Mapping[tuple[str, int], int]) -> list[Difference]:
        """Report the expected events the pipeline committed past (``committed``: its group's offsets)."""
        found = []
        for event_id, expected in [(e, x) for e, waiting in self.expected.items() for x in waiting]:
            if expected.by_merchant is None:
                if committed.get((self.input_topic, expected.partition), -1) > expected.offset:
                    found.append(self._missing(event_id, expected, f"the pipeline committed {self.input_topic}"
                                               f"[{expected.partition}] past offset {expected.offset}, but the "
                                               f"event never reached {self.by_merchant_topic}"))
            else:
                partition, offset = expected.by_merchant
                if committed.get((self.by_merchant_topic, partition), -1) > offset:
                    found.append(self._missing(event_id, expected, f"the pipeline committed {self.by_merchant_topic}"
                                               f"[{partition}] past offset {offset}, but the event's total "
                                               "update never came"))
        return found

    def _missing(self, event_id: str, expected: Expected, detail: str) -> Difference:
        waiting = self.expected[event_id]
        waiting.remove(expected)
        if not waiting:
            del self.expected[event_id]
        self.counted[event_id] = expected.read_at
        return self._found("missing", event_id, expected.merchant_id, detail)

    def _found(self, kind: str, event_id: str, merchant: str, detail: str) -> Difference:
        self.differences[kind] += 1
        return Difference(kind, event_id, merchant, detail)

    # -- progress --------------------------------------------------------------
    def waiting(self) -> int:
        """Valid input events waiting for their update."""
        return sum(len(waiting) for waiting in self.expected.values())

    def watermarks(self) -> dict[int, int]:
        """Per input partition, the offset below which every record has been judged."""
        marks = dict(self.positions.get(self.input_topic, {}))
        for expected in (x for waiting in self.expected.values() for x in waiting):
            if expected.offset < marks.get(expected.partition, expected.offset + 1):
                marks[expected.partition] = expected.offset
        return marks

    def forget_expired(self) -> None:
        """Drop what is older than the dedup retention before the newest event time read."""
        cutoff = self.newest_read_at - self.retention_s
        for seen in self.seen.values():
            for event_id in [e for e, entry in seen.items() if entry.first_seen < cutoff]:
                del seen[event_id]
        for event_id in [e for e, ts in self.counted.items() if ts < cutoff]:
            del self.counted[event_id]

    # -- saving ----------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the state to ``path`` atomically: a crash leaves the previous round's."""
        state = {
            "format": FORMAT,
            "positions": {topic: {str(p): o for p, o in parts.items()} for topic, parts in self.positions.items()},
            "seen": {str(p): {e: [s.fingerprint, s.first_seen] for e, s in seen.items()}
                     for p, seen in self.seen.items()},
            "expected": {e: [asdict(x) for x in waiting] for e, waiting in self.expected.items()},
            "counted": self.counted,
            "totals": self.totals,
            "differences": dict(self.differences),
            "checked_events": self.checked_events,
            "rounds": self.rounds,
            "newest_read_at": self.newest_read_at,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(state))
        temporary.replace(path)

    def load(self, path: Path) -> bool:
        """Resume from ``path``; False if there is nothing to resume from."""
        if not path.exists():
            return False
        state: dict[str, Any] = json.loads(path.read_text())
        if state.get("format") != FORMAT:
            raise ValueError(f"{path} was written by another version of reconcile --follow: move it away to start over")
        self.positions = {t: {int(p): o for p, o in parts.items()} for t, parts in state["positions"].items()}
        self.seen = {int(p): {e: SeenEvent(fingerprint=f, first_seen=s) for e, (f, s) in seen.items()}
                     for p, seen in state["seen"].items()}
        self.expected = {
            event_id: [Expected(**{**fields,
                                   "by_merchant": tuple(fields["by_merchant"]) if fields["by_merchant"] else None})
                       for fields in waiting]
            for event_id, waiting in state["expected"].items()}
        self.counted = state["counted"]
        self.totals = {m: (c, a) for m, (c, a) in state["totals"].items()}
        self.differences = Counter({kind: state["differences"].get(kind, 0) for kind in KINDS})
        self.checked_events = state["checked_events"]
        self.rounds = state["rounds"]
        self.newest_read_at = state["newest_read_at"]
        return True


def _event_id(value: Optional[bytes]) -> Optional[str]:
    try:
        event_id = json.loads(value)["event_id"]
    except (TypeError, ValueError, KeyError):
        return None
    return event_id if isinstance(event_id, str) else None
