"""Load generator: deterministic payment events with duplicates and bad records mixed in."""
import json
from collections import Counter

import pytest

from agents.models import Payment
from agents.validation import Reason, Rejection, parse_payment
from app.loadgen import BAD_KINDS, LoadSpec, generate
from config import load

DEFAULTS = load({})
CLOCK = lambda: 1000.0  # noqa: E731 - generate stamps ts from the clock


def records(**spec):
    return list(generate(LoadSpec(**spec), clock=CLOCK))


def parse(raw):
    return parse_payment(raw, max_bytes=DEFAULTS.max_event_bytes, max_amount_cents=DEFAULTS.max_amount_cents)


@pytest.fixture(scope="module")
def sample():
    return records(count=5000, seed=7)


def test_same_seed_and_clock_give_the_same_records():
    assert records(count=500, seed=3) == records(count=500, seed=3)


def test_different_seeds_give_different_records():
    assert records(count=500, seed=3) != records(count=500, seed=4)


@pytest.mark.parametrize("count", [0, 1, 137])
def test_count_is_respected(count):
    assert len(records(count=count)) == count


def test_kinds_appear_at_roughly_the_configured_rates(sample):
    kinds = Counter(r.kind for r in sample)
    assert 0.03 <= kinds["duplicate"] / len(sample) <= 0.07
    assert 0.01 <= sum(kinds[k] for k in BAD_KINDS) / len(sample) <= 0.035
    assert set(kinds) == {"valid", "duplicate", *BAD_KINDS}


def test_no_duplicates_or_bad_records_when_both_rates_are_zero():
    assert {r.kind for r in records(count=500, duplicate_rate=0, bad_rate=0)} == {"valid"}


def test_valid_and_duplicate_records_pass_validation(sample):
    for r in sample:
        if r.kind in ("valid", "duplicate"):
            assert isinstance(parse(r.value), Payment), r


def test_duplicate_repeats_an_earlier_valid_record_byte_for_byte_with_its_key(sample):
    earlier = set()
    for r in sample:
        if r.kind == "valid":
            earlier.add((r.key, r.value))
        elif r.kind == "duplicate":
            assert (r.key, r.value) in earlier


@pytest.mark.parametrize("record_bytes", [0, 1024])
def test_each_bad_kind_except_conflict_is_rejected_for_its_own_reason(record_bytes):
    for r in records(count=5000, seed=7, record_bytes=record_bytes):
        if r.kind in BAD_KINDS and r.kind != "conflict":
            result = parse(r.value)
            assert isinstance(result, Rejection) and result.reason is Reason(r.kind), (r, result)


def test_conflict_reuses_an_earlier_event_id_and_key_with_another_amount(sample):
    earlier = {}
    conflicts = 0
    for r in sample:
        if r.kind == "valid":
            earlier[json.loads(r.value)["event_id"]] = (r.key, json.loads(r.value))
        elif r.kind == "conflict":
            conflicts += 1
            payment = parse(r.value)
            assert isinstance(payment, Payment), "a conflict is itself a well-formed event"
            key, original = earlier[payment.event_id]
            assert r.key == key
            assert payment.amount_cents != original["amount_cents"]
    assert conflicts > 0


@pytest.mark.parametrize(
    "bad",
    [
        {"count": -1},
        {"rate": -0.5},
        {"merchants": 0},
        {"customers": 0},
        {"duplicate_rate": -0.1},
        {"duplicate_rate": 1.1},
        {"bad_rate": 2},
        {"duplicate_rate": 0.6, "bad_rate": 0.5},
    ],
    ids=repr,
)
def test_load_spec_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        LoadSpec(**bad)


def test_padded_events_reach_the_asked_size_and_still_parse():
    padded = [r for r in records(count=300, seed=5, record_bytes=1024) if r.kind == "valid"]
    assert padded and all(len(r.value) == 1024 for r in padded)
    assert all(isinstance(parse(r.value), Payment) for r in padded)


def test_padding_changes_nothing_but_the_size():
    plain = [json.loads(r.value) for r in records(count=200, seed=5) if r.kind == "valid"]
    padded = [json.loads(r.value) for r in records(count=200, seed=5, record_bytes=1024) if r.kind == "valid"]
    assert [{k: v for k, v in e.items() if k != "pad"} for e in padded] == plain
