"""Records' private parts: their options, field descriptors, Faust's json codec.

Each is named, with the reason, in :mod:`faust_eos.faust_internals`.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, cast

import faust
from faust.models import fields as faust_fields
from faust.types.models import ModelT
from faust.utils import json as faust_json

#: field descriptors that, without coercion, keep the value they are given as it is
_PLAIN_FIELDS = (faust_fields.StringField, faust_fields.IntegerField, faust_fields.FloatField,
                 faust_fields.BooleanField)


def json_codec_is_orjson() -> bool:
    """Whether Faust's json codec encodes and decodes with orjson (it does when orjson is installed)."""
    return cast(Any, faust_json).orjson is not None  # not among the module's exported names


def is_model_class(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, ModelT)


def model_serializer(cls: Any) -> Any:
    """The serializer a model class names for itself (None if it names none)."""
    return cls._options.serializer


def model_namespace(cls: Any) -> str:
    """The name a model's payloads carry under ``"__faust"``."""
    namespace: str = cls._options.namespace
    return namespace


def model_includes_namespace(cls: Any) -> bool:
    """Whether a model's payloads carry its name under ``"__faust"`` (``include_metadata``)."""
    return bool(cls._options.include_metadata)


def plain_record_fields(cls: Any) -> Optional[tuple[str, ...]]:
    """The field names of ``cls``, in order, if it is a plain record (:func:`_plain_fields`); else None."""
    try:
        return _PLAIN_RECORDS[cls]
    except KeyError:
        fields = _PLAIN_RECORDS[cls] = _plain_fields(cls)
        return fields
    except TypeError:  # not hashable: not a class
        return None


def _plain_fields(cls: Any) -> Optional[tuple[str, ...]]:
    """The field names of ``cls``, in order, if it is a record that Faust builds by storing each value as given.

    That is a ``faust.Record`` whose every field is a str, int, float or bool
    field with no coercion, tag, conversion, renaming or exclusion, and that has
    no ``__post_init__`` and no validation; None for any other class.
    """
    if not (isinstance(cls, type) and issubclass(cls, faust.Record)) or hasattr(cls, "__post_init__"):
        return None
    options = cls._options
    if options.validation:
        return None
    for name, field in cast("Mapping[str, faust_fields.FieldDescriptor[Any]]", options.descriptors).items():
        if (type(field) not in _PLAIN_FIELDS or field.coerce or field.tag is not None or field._to_python is not None
                or field.lazy_coercion or field.exclude or field.parent is not None
                or not field.field == field.input_name == field.output_name == name):
            return None
    return tuple(options.descriptors)


_PLAIN_RECORDS: dict[Any, Optional[tuple[str, ...]]] = {}


def build_record(cls: Any, fields: tuple[str, ...], values: dict[str, Any], *, in_order: bool = False) -> Any:
    """A record of ``cls`` holding ``values`` (one per field of ``fields``, the plain record's
    :func:`plain_record_fields`), the same as ``cls(**values)`` builds, without its per-field setters.

    ``in_order``: the caller knows ``values`` name the fields in their order (it is checked otherwise).
    """
    record = cls.__new__(cls)
    if not in_order and tuple(values) != fields:
        values = {name: values[name] for name in fields}
    record.__dict__ = {"__evaluated_fields__": set(), **values}
    return record
