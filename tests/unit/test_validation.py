"""parse_payment: raw ``payments`` bytes -> Payment, or a Rejection naming the reason."""
import json
import random

import pytest

from agents import validation
from agents.models import Payment
from agents.validation import FIELDS, Reason, Rejection, parse_payment

MAX_BYTES = 4096
MAX_AMOUNT = 100_000_000


def parse(raw):
    return parse_payment(raw, max_bytes=MAX_BYTES, max_amount_cents=MAX_AMOUNT)


def event(**overrides):
    fields = {"event_id": "e-1", "merchant_id": "m001", "customer_id": "c00001", "amount_cents": 1234, "ts": 1000.5}
    fields.update(overrides)
    return json.dumps(fields).encode()


def without(name):
    fields = json.loads(event())
    del fields[name]
    return json.dumps(fields).encode()


def reason(raw):
    result = parse(raw)
    assert isinstance(result, Rejection), f"expected a rejection, got {result!r}"
    return result.reason


def test_valid_event_becomes_a_payment():
    payment = parse(event())
    assert isinstance(payment, Payment)
    assert (payment.event_id, payment.merchant_id, payment.customer_id) == ("e-1", "m001", "c00001")
    assert payment.amount_cents == 1234
    assert payment.ts == 1000.5


def test_integer_ts_is_accepted_as_a_float():
    payment = parse(event(ts=1000))
    assert payment.ts == 1000.0 and isinstance(payment.ts, float)


def test_zero_amount_and_amount_at_the_limit_are_valid():
    assert isinstance(parse(event(amount_cents=0)), Payment)
    assert isinstance(parse(event(amount_cents=MAX_AMOUNT)), Payment)


def test_extra_fields_are_ignored():
    assert isinstance(parse(event(note="hello")), Payment)


def test_null_value_is_not_json():
    assert reason(None) is Reason.NOT_JSON


@pytest.mark.parametrize("raw", [b"", b"{not json", b'{"event_id": "e-1"', b"\xff\xfe\xfa", b"nul"])
def test_unparseable_bytes_are_not_json(raw):
    assert reason(raw) is Reason.NOT_JSON


@pytest.mark.parametrize("raw", [b"[]", b"[1, 2]", b'"text"', b"42", b"null", b"true"])
def test_json_that_is_not_an_object_is_rejected(raw):
    assert reason(raw) is Reason.NOT_AN_OBJECT


@pytest.mark.parametrize("name", list(FIELDS))
def test_each_missing_field_is_reported_by_name(name):
    result = parse(without(name))
    assert result.reason is Reason.MISSING_FIELD
    assert result.detail == name


@pytest.mark.parametrize(
    "overrides",
    [
        {"amount_cents": True},
        {"amount_cents": False},
        {"amount_cents": "1234"},
        {"amount_cents": 12.5},
        {"amount_cents": None},
        {"ts": True},
        {"ts": "1000"},
        {"event_id": 7},
        {"merchant_id": None},
        {"customer_id": ["c1"]},
    ],
    ids=repr,
)
def test_wrong_types_are_rejected(overrides):
    assert reason(event(**overrides)) is Reason.WRONG_TYPE


@pytest.mark.parametrize("ts", [b"NaN", b"Infinity", b"-Infinity", b"1" + b"0" * 400])
def test_ts_that_is_not_a_finite_number_is_a_wrong_type(ts):
    raw = event(ts=0).replace(b'"ts": 0', b'"ts": ' + ts)
    assert reason(raw) is Reason.WRONG_TYPE


@pytest.mark.parametrize("name", ["event_id", "merchant_id", "customer_id"])
@pytest.mark.parametrize("blank", ["", "   "])
def test_empty_or_blank_ids_are_rejected(name, blank):
    result = parse(event(**{name: blank}))
    assert result.reason is Reason.EMPTY_ID
    assert result.detail == name


def test_negative_amount_is_rejected():
    assert reason(event(amount_cents=-1)) is Reason.NEGATIVE_AMOUNT


def test_amount_over_the_limit_is_absurd():
    assert reason(event(amount_cents=MAX_AMOUNT + 1)) is Reason.ABSURD_AMOUNT


def test_record_over_the_byte_limit_is_oversized_even_if_otherwise_valid():
    raw = event(note="x" * MAX_BYTES)
    assert len(raw) > MAX_BYTES
    assert reason(raw) is Reason.OVERSIZED


def test_record_exactly_at_the_byte_limit_is_not_oversized():
    raw = event(note="")
    raw = event(note="x" * (MAX_BYTES - len(raw)))
    assert len(raw) == MAX_BYTES
    assert isinstance(parse(raw), Payment)


def test_deeply_nested_json_is_rejected_not_raised():
    assert reason(b"[" * (MAX_BYTES - 1)) is Reason.NOT_JSON


def test_integer_beyond_pythons_digit_limit_is_rejected_not_raised():
    result = parse_payment(b"1" * 5000, max_bytes=10_000, max_amount_cents=MAX_AMOUNT)
    assert result.reason is Reason.NOT_JSON


def test_never_raises_on_arbitrary_bytes():
    rng = random.Random(42)
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(64))) for _ in range(2000)]
    # mutations of a valid record reach the later checks, not just the JSON parser
    valid = event()
    for _ in range(2000):
        mutated = bytearray(valid)
        for _ in range(rng.randrange(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        samples.append(bytes(mutated))
    for raw in samples:
        assert isinstance(parse(raw), (Payment, Rejection))


def judged_by_the_standard_library_alone(raw, monkeypatch):
    with monkeypatch.context() as patched:
        patched.setattr(validation, "_json_loads", json.loads)
        return parse(raw)


@pytest.mark.parametrize("raw", [
    event(amount_cents=2**70),  # orjson reads it as a float
    event(ts=2**70),
    event(ts=-(2**64) - 1),
    event(event_id=2**64 + 1),
    str(2**80).encode(),
    b"\xef\xbb\xbf" + event(),  # a byte order mark
    event(customer_id="\ud800"),  # an unpaired surrogate, escaped
    event(ts=0).replace(b'"ts": 0', b'"ts": NaN'),
    event(ts=0).replace(b'"ts": 0', b'"ts": 1e400'),
    event(ts=1e300),
    event(amount_cents=-(2**63)),
    event(),
], ids=repr)
def test_records_the_fast_parser_refuses_or_reads_otherwise_are_judged_as_the_standard_library_judges_them(
        raw, monkeypatch):
    assert repr(parse(raw)) == repr(judged_by_the_standard_library_alone(raw, monkeypatch))


def test_arbitrary_bytes_are_judged_as_the_standard_library_judges_them(monkeypatch):
    rng = random.Random(7)
    valid = event()
    for _ in range(3000):
        mutated = bytearray(valid)
        for _ in range(rng.randrange(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        raw = bytes(mutated)
        assert repr(parse(raw)) == repr(judged_by_the_standard_library_alone(raw, monkeypatch)), raw
