"""Reconcile's pure parts: recompute the expected outputs, then judge the actual ones."""
import json

import pytest

from agents.validation import Reason
from app.reconcile import (
    Expectation,
    Problems,
    Rec,
    check_dead_letters,
    check_update_stream,
    compare_finals,
    expect,
    find_late,
)
from config import load

SETTINGS = load({})


def payload(event_id="e-1", merchant_id="m001", amount_cents=100, ts=1000.0, customer_id="c1"):
    return json.dumps({"event_id": event_id, "merchant_id": merchant_id, "customer_id": customer_id,
                       "amount_cents": amount_cents, "ts": ts}).encode()


def rec(partition, offset, value, headers=None):
    return Rec(partition, offset, b"key", value, headers or {})


def run_expect(*recs):
    return expect(list(recs), SETTINGS)


# --- expect ---------------------------------------------------------------

def test_valid_event_is_counted():
    exp = run_expect(rec(0, 0, payload("e-1", amount_cents=100)))
    assert exp.inputs == 1
    assert list(exp.counted) == ["e-1"] and exp.counted["e-1"].amount_cents == 100
    assert exp.duplicates == 0 and exp.dead == {}


def test_repeat_in_the_same_partition_is_a_duplicate():
    exp = run_expect(rec(0, 0, payload("e-1")), rec(0, 1, payload("e-1")))
    assert exp.inputs == 2
    assert list(exp.counted) == ["e-1"]
    assert exp.duplicates == 1 and exp.dead == {}


def test_repeat_in_another_partition_is_not_a_duplicate_since_dedup_is_per_partition():
    exp = run_expect(rec(0, 0, payload("e-1")), rec(1, 0, payload("e-1")))
    assert exp.duplicates == 0 and exp.dead == {}
    assert "e-1" in exp.counted


def test_an_event_id_in_two_partitions_is_reported_as_an_input_problem():
    # each partition's dedup table sees e-1 for the first time, so the pipeline counts it twice;
    # reconcile must say why instead of only reporting a repeated update
    exp = run_expect(rec(0, 0, payload("e-1")), rec(1, 0, payload("e-1")))
    assert exp.split_event_ids == {"e-1": {0, 1}}


def test_repeat_with_other_content_in_the_same_partition_is_a_conflict_dead_letter():
    conflicting = payload("e-1", amount_cents=101)
    exp = run_expect(rec(0, 0, payload("e-1", amount_cents=100)), rec(0, 1, conflicting))
    assert exp.counted["e-1"].amount_cents == 100
    assert exp.dead == {(0, 1): (Reason.CONFLICT, conflicting)}
    assert exp.duplicates == 0


def test_bad_records_are_dead_letters_with_their_reason_and_bytes():
    exp = run_expect(rec(2, 7, b"{nope"), rec(2, 8, None), rec(3, 1, payload(amount_cents=-5)))
    assert exp.dead == {
        (2, 7): (Reason.NOT_JSON, b"{nope"),
        (2, 8): (Reason.NOT_JSON, None),
        (3, 1): (Reason.NEGATIVE_AMOUNT, payload(amount_cents=-5)),
    }
    assert exp.counted == {} and exp.inputs == 3


def test_a_bad_record_does_not_occupy_its_event_id():
    exp = run_expect(rec(0, 0, payload("e-1", amount_cents=-5)), rec(0, 1, payload("e-1", amount_cents=5)))
    assert exp.counted["e-1"].amount_cents == 5
    assert set(exp.dead) == {(0, 0)}


# --- check_update_stream ---------------------------------------------------

@pytest.fixture
def two_events():
    return run_expect(rec(0, 0, payload("e-1", amount_cents=100)), rec(0, 1, payload("e-2", amount_cents=50)))


def update(event_id, count, amount):
    return ("m001", {"event_id": event_id, "count": count, "amount_cents": amount})


def check(updates, expectation):
    problems = Problems()
    finals = check_update_stream(updates, expectation.counted, problems, what="totals",
                                 group_of=lambda p: p.merchant_id)
    return finals, set(problems.counts)


def test_correct_update_stream_has_no_problems_and_returns_final_totals(two_events):
    finals, problems = check([update("e-1", 1, 100), update("e-2", 2, 150)], two_events)
    assert problems == set()
    assert finals == {"m001": (2, 150)}


def test_event_applied_twice_is_a_duplicate_update(two_events):
    _, problems = check([update("e-1", 1, 100), update("e-1", 2, 200)], two_events)
    assert problems == {"totals: duplicate update", "totals: lost event"}


def test_gap_in_the_count_is_out_of_sequence(two_events):
    _, problems = check([update("e-1", 1, 100), update("e-2", 3, 150)], two_events)
    assert problems == {"totals: count out of sequence"}


def test_update_that_does_not_add_its_events_amount_is_a_wrong_running_sum(two_events):
    _, problems = check([update("e-1", 1, 100), update("e-2", 2, 999)], two_events)
    assert problems == {"totals: wrong running sum"}


def test_update_for_an_event_that_was_not_counted_is_unknown(two_events):
    _, problems = check([update("e-1", 1, 100), update("e-9", 2, 150)], two_events)
    assert problems == {"totals: unknown event", "totals: lost event"}


def test_counted_event_missing_from_the_stream_is_a_lost_event(two_events):
    _, problems = check([update("e-1", 1, 100)], two_events)
    assert problems == {"totals: lost event"}


# --- compare_finals ---------------------------------------------------------

def compare(actual, expected):
    problems = Problems()
    compare_finals(actual, expected, problems, what="totals")
    return dict(problems.counts)


def test_equal_finals_have_no_problems():
    assert compare({"m1": (2, 150)}, {"m1": (2, 150)}) == {}


def test_fewer_updates_than_expected_are_missing_updates():
    assert compare({"m1": (1, 100)}, {"m1": (2, 150)}) == {"totals: missing updates": 1}
    assert compare({}, {"m1": (2, 150)}) == {"totals: missing updates": 1}


def test_same_count_but_other_amount_or_an_unexpected_group_is_a_wrong_final_total():
    assert compare({"m1": (2, 151)}, {"m1": (2, 150)}) == {"totals: wrong final total": 1}
    assert compare({"m1": (2, 150), "m9": (1, 5)}, {"m1": (2, 150)}) == {"totals: wrong final total": 1}


# --- check_dead_letters -----------------------------------------------------

BAD = b"{nope"
CONFLICT = payload("e-1", amount_cents=101)


@pytest.fixture
def dead_expected():
    return run_expect(rec(0, 0, payload("e-1", amount_cents=100)), rec(0, 1, CONFLICT), rec(1, 4, BAD))


def dead_letter(source_partition, source_offset, reason, value, offset=0):
    headers = {
        "dlq.reason": reason.value.encode(),
        "dlq.detail": b"whatever",
        "dlq.source.topic": b"payments",
        "dlq.source.partition": str(source_partition).encode(),
        "dlq.source.offset": str(source_offset).encode(),
    }
    return Rec(0, offset, b"key", value, headers)


def dlq_problems(dead_letters, expectation):
    problems = Problems()
    check_dead_letters(dead_letters, expectation, SETTINGS, problems)
    return dict(problems.counts)


def test_exactly_the_expected_dead_letters_have_no_problems(dead_expected):
    letters = [dead_letter(0, 1, Reason.CONFLICT, CONFLICT), dead_letter(1, 4, Reason.NOT_JSON, BAD, offset=1)]
    assert dlq_problems(letters, dead_expected) == {}


def test_expected_dead_letter_that_never_arrived_is_missing(dead_expected):
    assert dlq_problems([dead_letter(0, 1, Reason.CONFLICT, CONFLICT)], dead_expected) == {"dlq: missing": 1}


def test_dead_letter_for_a_good_record_is_unexpected(dead_expected):
    letters = [dead_letter(0, 1, Reason.CONFLICT, CONFLICT), dead_letter(1, 4, Reason.NOT_JSON, BAD),
               dead_letter(0, 0, Reason.NOT_JSON, payload("e-1"))]
    assert dlq_problems(letters, dead_expected) == {"dlq: unexpected": 1}


def test_dead_letter_written_twice_is_a_duplicate(dead_expected):
    letters = [dead_letter(0, 1, Reason.CONFLICT, CONFLICT), dead_letter(1, 4, Reason.NOT_JSON, BAD),
               dead_letter(1, 4, Reason.NOT_JSON, BAD, offset=2)]
    assert dlq_problems(letters, dead_expected) == {"dlq: duplicate": 1}


def test_dead_letter_with_another_reason_is_a_wrong_reason(dead_expected):
    letters = [dead_letter(0, 1, Reason.CONFLICT, CONFLICT), dead_letter(1, 4, Reason.OVERSIZED, BAD)]
    assert dlq_problems(letters, dead_expected) == {"dlq: wrong reason": 1}


def test_dead_letter_whose_bytes_differ_from_the_input_is_changed(dead_expected):
    letters = [dead_letter(0, 1, Reason.CONFLICT, CONFLICT), dead_letter(1, 4, Reason.NOT_JSON, b"{nope}")]
    assert dlq_problems(letters, dead_expected) == {"dlq: bytes changed": 1}


def test_dead_letter_without_source_headers_is_malformed(dead_expected):
    letters = [dead_letter(0, 1, Reason.CONFLICT, CONFLICT), dead_letter(1, 4, Reason.NOT_JSON, BAD),
               Rec(0, 9, None, BAD, {"dlq.reason": b"not_json"})]
    assert dlq_problems(letters, dead_expected) == {"dlq: malformed": 1}


def test_empty_expectation_and_empty_dlq_agree():
    assert dlq_problems([], Expectation()) == {}


# --- late events --------------------------------------------------------------

def by_merchant(partition, offset, event_id, ts):
    return rec(partition, offset, payload(event_id, ts=ts))


def test_an_event_behind_the_closed_window_of_its_partitions_stream_time_is_late():
    # 60 s windows, 6 s grace: stream time 130 closed [0, 60) and, at 126, [60, 120)
    records = [by_merchant(0, 0, "e-1", 10.0), by_merchant(0, 1, "e-2", 130.0), by_merchant(0, 2, "e-3", 59.0),
               by_merchant(0, 3, "e-4", 121.0), by_merchant(1, 0, "e-5", 59.0)]
    late = find_late(records, SETTINGS)
    assert late == {(0, 2): ("e-3", payload("e-3", ts=59.0))}  # partition 1 has its own stream time


def test_late_events_count_in_totals_but_not_in_windows_and_are_expected_as_dead_letters():
    exp = run_expect(rec(0, 0, payload("e-1", ts=130.0)), rec(0, 1, payload("e-2", ts=10.0)))
    exp.late = find_late([by_merchant(3, 0, "e-1", 130.0), by_merchant(3, 1, "e-2", 10.0)], SETTINGS)
    assert set(exp.counted) == {"e-1", "e-2"} and set(exp.counted_in_windows()) == {"e-1"}
    late_letter = dead_letter(3, 1, Reason.LATE, payload("e-2", ts=10.0))
    late_letter.headers["dlq.source.topic"] = SETTINGS.by_merchant_topic.encode()
    assert dlq_problems([late_letter], exp) == {}
    assert dlq_problems([], exp) == {"dlq: missing": 1}
