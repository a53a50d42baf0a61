"""new_record: the record ``cls(**values)`` builds, built without Faust's per-field setters where that is the same."""
from __future__ import annotations

from typing import Optional

import faust
import pytest

from faust_eos import new_record


class Total(faust.Record, serializer="json"):
    merchant_id: str
    count: int
    share: float
    open: bool


class WithDefault(faust.Record):
    name: str
    label: Optional[str] = None


class Coerced(faust.Record, coerce=True):
    count: int


class PostInit(faust.Record):
    count: int

    def __post_init__(self) -> None:
        self.double = self.count * 2


def same(a: faust.Record, b: faust.Record) -> bool:
    return type(a) is type(b) and a == b and vars(a) == vars(b)


@pytest.mark.parametrize("values", [
    {"merchant_id": "m1", "count": 3, "share": 0.5, "open": True},
    {"open": False, "share": 1.5, "count": 0, "merchant_id": ""},  # keywords in another order
])
def test_a_plain_record_is_the_one_its_class_builds(values):
    built = new_record(Total, **values)
    assert same(built, Total(**values))
    assert built.dumps() == Total(**values).dumps()


def test_a_record_built_so_is_a_record_of_its_own():
    first, second = new_record(Total, merchant_id="m", count=1, share=0.0, open=True), \
        new_record(Total, merchant_id="m", count=1, share=0.0, open=True)
    first.count = 2
    assert second.count == 1


@pytest.mark.parametrize("cls, values", [
    (WithDefault, {"name": "n"}),  # a field left to its default
    (Coerced, {"count": "7"}),
    (PostInit, {"count": 2}),
])
def test_any_other_record_is_built_by_its_class(cls, values):
    assert same(new_record(cls, **values), cls(**values))


@pytest.mark.parametrize("values", [
    {"merchant_id": "m1", "count": 3, "share": 0.5},  # one missing
    {"merchant_id": "m1", "count": 3, "share": 0.5, "open": True, "extra": 1},
    {"merchant_id": "m1", "count": 3, "share": 0.5, "shut": True},
])
def test_fields_missing_or_unknown_raise_faust_s_own_error(values):
    with pytest.raises(TypeError) as ours:
        new_record(Total, **values)
    with pytest.raises(TypeError) as fausts:
        Total(**values)
    assert str(ours.value) == str(fausts.value)
