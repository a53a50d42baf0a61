"""Contract of Faust's records: what faust_eos.codec relies on to decode plain records without their setters.

faust_eos.faust_internals reads a record class's ``_options`` and its field
descriptors to tell a plain record (each value stored as given), and builds
such records by filling their ``__dict__``. Each test fails if a release of
Faust stops building records that way.
"""
from __future__ import annotations

from typing import Optional

import faust
import pytest
from faust.models.fields import StringField

from faust_eos import faust_internals


class Plain(faust.Record, serializer="json"):
    name: str
    count: int
    share: float
    active: bool


class WithDefault(faust.Record):
    name: str
    label: Optional[str] = None


class Coerced(faust.Record, coerce=True):
    count: int


class Validated(faust.Record, validation=True):
    count: int


class PostInit(faust.Record):
    count: int

    def __post_init__(self) -> None:
        self.double = self.count * 2


class Renamed(faust.Record):
    name: str = StringField(input_name="n")


class Excluded(faust.Record):
    name: str
    note: str = StringField(required=False, default="", exclude=True)


class Nested(faust.Record):
    plain: Plain


class Listed(faust.Record):
    names: list


def test_a_record_of_str_int_float_and_bool_fields_is_plain_and_names_its_fields_in_order():
    assert faust_internals.plain_record_fields(Plain) == ("name", "count", "share", "active")
    assert faust_internals.plain_record_fields(WithDefault) == ("name", "label")


@pytest.mark.parametrize("cls", [Coerced, Validated, PostInit, Renamed, Excluded, Nested, Listed, int, str, object])
def test_a_record_that_converts_checks_renames_or_nests_its_values_is_not_plain(cls):
    assert faust_internals.plain_record_fields(cls) is None


@pytest.mark.parametrize("values", [
    {"name": "a", "count": 1, "share": 0.5, "active": True},
    {"active": False, "share": 2, "count": -1, "name": ""},  # another order, an int for a float
])
def test_a_plain_record_built_from_its_values_is_the_record_its_constructor_builds(values):
    built = faust_internals.build_record(Plain, ("name", "count", "share", "active"), dict(values))
    constructed = Plain(**values)
    assert type(built) is Plain and built == constructed
    assert list(vars(built).items()) == list(vars(constructed).items())
    assert built.asdict() == constructed.asdict() and repr(built) == repr(constructed)
    assert built.dumps() == constructed.dumps() and hash(built) == hash(constructed)
    built.count = 7  # a record built so still takes assignments as one constructed does
    assert built.count == 7 and built != constructed


def test_faust_s_json_codec_runs_on_orjson():
    assert faust_internals.json_codec_is_orjson()


def test_a_model_class_names_its_serializer_and_namespace():
    assert faust_internals.is_model_class(Plain) and not faust_internals.is_model_class(dict)
    assert faust_internals.model_serializer(Plain) == "json" and faust_internals.model_serializer(WithDefault) is None
    assert faust_internals.model_namespace(Plain) == f"{__name__}.Plain"
    assert Plain("a", 1, 0.5, True).to_representation()["__faust"] == {"ns": faust_internals.model_namespace(Plain)}
