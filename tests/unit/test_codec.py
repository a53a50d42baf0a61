"""The app's codecs: Faust's encodings, every byte and every decoded object the same, the common cases faster.

Each case is checked against the installed Faust's own registry, so a release
that encodes otherwise fails here, not in a changelog.
"""
from __future__ import annotations

import math
import re
from typing import Any, Optional

import faust
import pytest
from faust.exceptions import KeyDecodeError, ValueDecodeError
from faust.models.fields import StringField

from faust_eos import codec
from faust_eos.codec import codecs_of


class Total(faust.Record, serializer="json"):
    merchant_id: str
    count: int
    cents: float
    settled: bool


class Renamed(faust.Record, serializer="json"):
    merchant_id: str = StringField(input_name="merchant")


class Optional_(faust.Record, serializer="json"):
    merchant_id: str
    label: Optional[str] = "none"


class Untyped(faust.Record):  # no serializer of its own: the registry's default decides
    name: str


class Nested(faust.Record, serializer="json"):
    total: Total


@pytest.fixture
def app() -> faust.App:
    return faust.App("codec-test")


TOTAL = Total("m1", 3, 1.5, False)

VALUES = [  # (type, serializer, value)
    (None, None, "text"), (None, None, b"bytes"), (None, None, 7), (None, None, 2.5), (None, None, True),
    (None, "json", "text"), (None, "json", 7), (None, "json", 2.5), (None, "json", None), (None, "raw", "text"),
    (float, None, 2.5), (float, None, 3), (int, None, 4), (str, None, "text"), (bytes, None, b"raw"),
    (str, "json", "text"), (Total, None, TOTAL), (None, None, TOTAL), (Total, "raw", TOTAL),
    (Optional_, None, Optional_("m1")), (Nested, None, Nested(TOTAL)), (Untyped, None, Untyped("x")),
    (None, None, float("nan")), (None, None, 2**70), (None, "json", {"a": [1, 2]}),
]
KEYS = [(None, None, "m1"), (None, None, b"m1"), (str, None, "m1"), (None, "json", "m1"), (None, "json", 5),
        (None, None, None), (Total, None, TOTAL), (None, "raw", "ü")]


@pytest.mark.parametrize("typ, serializer, value", VALUES)
def test_a_value_encodes_to_the_bytes_faust_gives_it(app, typ, serializer, value):
    codecs = codecs_of(app)
    try:
        expected = app.serializers.dumps_value(typ, value, serializer=serializer)
    except Exception as exc:  # what Faust cannot encode, the codecs cannot either
        for _ in range(2):
            with pytest.raises(type(exc)):
                codecs.dumps_value(typ, value, serializer)
        return
    assert codecs.dumps_value(typ, value, serializer) == expected  # learnt against Faust's
    assert codecs.dumps_value(typ, value, serializer) == expected  # and the way learnt


@pytest.mark.parametrize("typ, serializer, key", KEYS)
def test_a_key_encodes_to_the_bytes_faust_gives_it(app, typ, serializer, key):
    codecs = codecs_of(app)
    expected = app.serializers.dumps_key(typ, key, serializer=serializer)
    assert codecs.dumps_key(typ, key, serializer) == expected
    assert codecs.dumps_key(typ, key, serializer) == expected


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b and getattr(a, "__dict__", None) == getattr(b, "__dict__", None)


RAW_VALUES = [  # (type, serializer, raw)
    (Total, None, b'{"merchant_id":"m1","count":3,"cents":1.5,"settled":false,"__faust":{"ns":"test_codec.Total"}}'),
    (Total, None, b'{"count":3,"merchant_id":"m1","cents":1.5,"settled":false}'),  # another order, no namespace
    (Total, None, b'{"merchant_id":"m1","count":3,"cents":2,"settled":false}'),  # an int where a float is declared
    (Total, None, b'{"merchant_id":"m1","count":3,"cents":1.5,"settled":false,"extra":1}'),  # kept, as Faust keeps it
    (Total, None, b'{"merchant_id":"m1","count":3,"cents":1.5,"settled":false,"__faust":{"ns":"test_codec.Untyped"}}'),
    (Total, None, b'{"merchant_id":null,"count":3,"cents":1.5,"settled":false}'),
    (Optional_, None, b'{"merchant_id":"m1","label":null}'),  # the default replaces null
    (Optional_, None, b'{"merchant_id":"m1"}'),
    (Renamed, None, b'{"merchant":"m1"}'),
    (None, None, b'{"merchant_id":"m1","count":3,"cents":1.5,"settled":false,"__faust":{"ns":"test_codec.Total"}}'),
    (None, None, b'{"a":1}'), (None, None, b'[1,2]'), (None, None, b'"text"'), (None, None, b"7"),
    (float, None, b"2.5"), (float, None, b"3"), (int, None, b"4"), (str, None, b'"text"'), (str, "raw", b"text"),
    (bytes, "raw", b"raw"), (str, None, b"text"),
    (None, "raw", b"raw"), (str, "json", b'"text"'), (Untyped, None, b'{"name":"x"}'), (None, None, None),
]


@pytest.mark.parametrize("typ, serializer, raw", RAW_VALUES)
def test_a_value_decodes_to_the_object_faust_gives(app, typ, serializer, raw):
    codecs = codecs_of(app)
    try:
        expected = app.serializers.loads_value(typ, raw, serializer=serializer)
    except ValueDecodeError as exc:  # what Faust cannot decode, the codecs cannot either
        for _ in range(2):
            with pytest.raises(ValueDecodeError, match=re.escape(str(exc))):
                codecs.loads_value(typ, raw, serializer)
        return
    for _ in range(2):  # learnt against Faust's, then the way learnt
        got = codecs.loads_value(typ, raw, serializer)
        assert same(got, expected), (got, expected)
        if isinstance(expected, faust.Record):
            assert list(vars(got)) == list(vars(expected))


@pytest.mark.parametrize("typ, serializer, raw", [(None, None, b"m1"), (str, None, b"m1"), (None, "json", b'"m1"'),
                                                  (Total, None, None)])
def test_a_key_decodes_to_the_object_faust_gives(app, typ, serializer, raw):
    codecs = codecs_of(app)
    try:
        expected: Any = app.serializers.loads_key(typ, raw, serializer=serializer)
    except KeyDecodeError as exc:
        with pytest.raises(KeyDecodeError, match=re.escape(str(exc))):
            codecs.loads_key(typ, raw, serializer)
        return
    assert same(codecs.loads_key(typ, raw, serializer), expected)


@pytest.mark.parametrize("raw", [b"not json", b'{"merchant_id":"m1"', b"\xff"])
def test_what_faust_cannot_decode_raises_faust_s_own_error(app, raw):
    with pytest.raises(ValueDecodeError):
        app.serializers.loads_value(Total, raw, serializer=None)
    with pytest.raises(ValueDecodeError):
        codecs_of(app).loads_value(Total, raw, None)


def test_one_loader_decodes_many_values_of_one_type(app):
    load = codecs_of(app).value_loader(Total, None)
    raws = [Total(f"m{i}", i, i / 2, i % 2 == 0).dumps() for i in range(5)]
    assert [load(raw) for raw in raws] == [Total(f"m{i}", i, i / 2, i % 2 == 0) for i in range(5)]


def test_one_encoder_encodes_values_of_every_class_as_the_registry_does(app):
    encode_value, encode_key = codecs_of(app).encoder("value", None), codecs_of(app).encoder("key", None)
    mixed = [TOTAL, "text", 7, TOTAL, b"bytes", 2.5, "text", True, Total("m2", 1, 0.5, True)]
    for _ in range(2):  # once learnt against Faust's answer, then the way learnt
        assert [encode_value(v) for v in mixed] == [app.serializers.dumps_value(None, v) for v in mixed]
        assert ([encode_key(k) for k in ("m1", b"m1", None)]
                == [app.serializers.dumps_key(None, k) for k in ("m1", b"m1", None)])
    with pytest.raises(TypeError, match="64-bit"):  # an int the learnt way cannot take: Faust's answer, an error
        encode_value(2**70)


def test_an_app_has_one_codecs(app):
    assert codecs_of(app) is codecs_of(app)
    assert codecs_of(app) is not codecs_of(faust.App("another"))


class MisleadingRegistry:
    """A registry whose answers differ from what the fast ways give (as a codec of one's own would)."""

    key_serializer = "raw"
    value_serializer = "json"

    def dumps_value(self, typ: Any, value: Any, *, serializer: Any = None) -> bytes:
        return b"mine:" + repr(value).encode()

    def loads_value(self, typ: Any, raw: Optional[bytes], *, serializer: Any = None) -> Any:
        return ("mine", raw)


def test_an_encoding_that_differs_from_the_registry_s_is_given_up_for_the_registry_s(caplog):
    codecs = codec.Codecs(MisleadingRegistry())
    assert codecs.dumps_value(None, 7, None) == b"mine:7"
    assert codecs.dumps_value(None, 8, None) == b"mine:8"
    assert "using Faust's" in caplog.text


def test_an_encoder_whose_fast_way_was_given_up_encodes_as_the_registry_does():
    encode = codec.Codecs(MisleadingRegistry()).encoder("value", None)
    assert [encode(7), encode(8)] == [b"mine:7", b"mine:8"]


def test_a_decoding_that_differs_from_the_registry_s_is_given_up_for_the_registry_s(caplog):
    codecs = codec.Codecs(MisleadingRegistry())
    assert codecs.loads_value(None, b"7", None) == ("mine", b"7")
    assert codecs.loads_value(None, b"8", None) == ("mine", b"8")
    assert "using Faust's" in caplog.text


def test_a_loader_taken_before_its_decoding_was_given_up_decodes_as_the_registry_does_too():
    codecs = codec.Codecs(MisleadingRegistry())
    load = codecs.value_loader(None)  # as a batch takes one for all its records
    assert [load(b"7"), load(b"8")] == [("mine", b"7"), ("mine", b"8")]


class Bare(faust.Record, serializer="json", include_metadata=False):
    merchant_id: str
    count: int


def reordered_total() -> Total:
    """A total whose count was removed and set again: its attributes no longer in field order."""
    total = Total("m1", 3, 1.5, False)
    del vars(total)["count"]
    total.count = 4
    return total


def extended_total() -> Total:
    total = Total("m1", 3, 1.5, False)
    total.note = "an attribute that is no field"
    return total


@pytest.mark.parametrize("record", [reordered_total(), extended_total(), Total("m1", 3, math.nan, True),
                                    Bare("m1", 3)], ids=["reordered", "extended", "nan", "no-namespace"])
def test_a_plain_record_encodes_to_faust_s_bytes_however_its_attributes_were_set(app, record, caplog):
    codecs = codecs_of(app)
    first = type(record)(**{name: getattr(record, name) for name in record._options.fields})  # as Faust builds it
    assert codecs.dumps_value(None, first, None) == app.serializers.dumps_value(None, first)  # the fast way learnt
    assert codecs.dumps_value(None, record, None) == app.serializers.dumps_value(None, record)
    assert "the fast way" not in caplog.text
