"""Faust's encodings of keys and values, with the common cases done directly.

Faust encodes a value through its serializer registry, its codec chain and
its model machinery, and decodes a record through per-field setters: several
microseconds each way, paid for every send, table read and table write. A
:class:`Codecs` gives the same bytes and the same objects for the common cases
(``raw`` str and bytes; ``json`` through orjson, as Faust's own json codec
runs; plain records: :func:`faust_eos.faust_internals.plain_record_fields`) in
a fraction of that, and hands everything else to Faust's registry.

Every answer is Faust's own: each fast way is learnt per type and serializer
against Faust's answer for the first value it meets, and given up (logged)
if they differ; a value the fast way cannot take (a type orjson does not
know, a payload that is not a plain record) goes to Faust, which raises its
own errors for what it cannot take either.
"""
from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, Optional

import orjson
from faust.serializers import codecs as faust_codecs
from mode.utils.compat import want_bytes, want_str

from faust_eos import faust_internals

log = logging.getLogger(__name__)

Encoder = Callable[[Any], Optional[bytes]]
Decoder = Callable[[bytes], Any]

#: the orjson options of Faust's json codec
FAUST_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_UTC_Z


class _Unhandled:
    def __repr__(self) -> str:
        return "UNHANDLED"


#: what a fast decoding answers for a payload it leaves to Faust
UNHANDLED: Any = _Unhandled()


def codecs_of(app: Any) -> "Codecs":
    """The :class:`Codecs` of ``app`` (one per app, kept while its serializer registry lives)."""
    registry = app.serializers
    found = _BY_REGISTRY.get(registry)
    if found is None:
        found = _BY_REGISTRY[registry] = Codecs(registry)
    return found


class Codecs:
    """Encodes and decodes keys and values exactly as a Faust serializer registry does."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry
        self._json = (faust_internals.json_codec_is_orjson()
                      and type(faust_codecs.get_codec("json")) is faust_codecs.json)
        self._raw = type(faust_codecs.get_codec("raw")) is faust_codecs.raw
        self._encoders: dict[tuple[Any, ...], Encoder] = {}
        self._decoders: dict[tuple[Any, ...], Callable[[Optional[bytes]], Any]] = {}

    # -- encoding ----------------------------------------------------------------
    def dumps_key(self, typ: Any, key: Any, serializer: Any = None) -> Optional[bytes]:
        """``key`` as ``registry.dumps_key(typ, key, serializer=serializer)`` gives it."""
        encode = self._encoders.get(("key", typ, serializer, type(key)))
        return encode(key) if encode is not None else self._learn_encoder("key", typ, serializer, key)

    def dumps_value(self, typ: Any, value: Any, serializer: Any = None) -> Optional[bytes]:
        """``value`` as ``registry.dumps_value(typ, value, serializer=serializer)`` gives it."""
        encode = self._encoders.get(("value", typ, serializer, type(value)))
        return encode(value) if encode is not None else self._learn_encoder("value", typ, serializer, value)

    def encoder(self, part: str, typ: Any, serializer: Any = None) -> Encoder:
        """What encodes keys (``part`` "key") or values of this type and serializer as :meth:`dumps_key` or
        :meth:`dumps_value` do, its way per class of value looked up once (for encoding many)."""
        dumps = self.dumps_key if part == "key" else self.dumps_value
        learnt: dict[type, Encoder] = {}

        def encode(value: Any) -> Optional[bytes]:
            found = learnt.get(type(value))
            if found is not None:
                return found(value)
            raw = dumps(typ, value, serializer)
            found = self._encoders.get((part, typ, serializer, type(value)))
            if found is not None:
                learnt[type(value)] = found
            return raw

        return encode

    def _learn_encoder(self, part: str, typ: Any, serializer: Any, value: Any) -> Optional[bytes]:
        faust_dumps = getattr(self._registry, f"dumps_{part}")

        def by_faust(v: Any) -> Optional[bytes]:
            raw: Optional[bytes] = faust_dumps(typ, v, serializer=serializer)
            return raw

        fast = self._fast_encoder(part, typ, serializer, type(value), by_faust)
        expected = by_faust(value)
        encoder: Encoder = by_faust
        if fast is not None:
            got = fast(value)
            if got == expected:
                encoder = fast
            else:
                log.warning("Encoding %ss of type %s (%s) the fast way gave %r where Faust gives %r: using Faust's",
                            part, type(value).__name__, serializer, got, expected)
        self._encoders[(part, typ, serializer, type(value))] = encoder
        return expected

    def _fast_encoder(self, part: str, typ: Any, serializer: Any, kind: type, by_faust: Encoder) -> Optional[Encoder]:
        """The direct way to encode values of class ``kind`` as the registry would, handing ``by_faust`` what it
        cannot take; None if there is none."""
        if faust_internals.is_model_class(kind):
            serializer = faust_internals.model_serializer(kind) or serializer
        serializer = self._resolved_serializer(part, typ, serializer)
        if kind is bytes or not serializer:
            return _as_bytes if part == "key" else _unchanged  # as the registry: bytes pass through
        if kind is type(None):
            return None
        if serializer == "raw" and self._raw and kind is str:
            return str.encode
        if serializer == "json" and self._json:
            if faust_internals.is_model_class(kind):
                fields = faust_internals.plain_record_fields(kind)
                return _json_record(by_faust) if fields is None else _plain_record_json(kind, fields, by_faust)
            if kind in (str, int, float, bool):
                return _json_plain(by_faust)
        return None

    def _resolved_serializer(self, part: str, typ: Any, serializer: Any) -> Any:
        """The serializer the registry settles on for this type and argument (its rules, per part)."""
        default = self._registry.key_serializer if part == "key" else self._registry.value_serializer
        chosen = serializer or default
        if not chosen and typ in (str, bytes):
            return "raw"
        return chosen

    # -- decoding ----------------------------------------------------------------
    def loads_key(self, typ: Any, raw: Optional[bytes], serializer: Any = None) -> Any:
        """``raw`` as ``registry.loads_key(typ, raw, serializer=serializer)`` gives it."""
        return self.key_loader(typ, serializer)(raw)

    def loads_value(self, typ: Any, raw: Optional[bytes], serializer: Any = None) -> Any:
        """``raw`` as ``registry.loads_value(typ, raw, serializer=serializer)`` gives it."""
        return self.value_loader(typ, serializer)(raw)

    def key_loader(self, typ: Any, serializer: Any = None) -> Callable[[Optional[bytes]], Any]:
        """A function decoding raw keys of this type and serializer (for decoding many)."""
        return self._loader("key", typ, serializer)

    def value_loader(self, typ: Any, serializer: Any = None) -> Callable[[Optional[bytes]], Any]:
        """A function decoding raw values of this type and serializer (for decoding many)."""
        return self._loader("value", typ, serializer)

    def _loader(self, part: str, typ: Any, serializer: Any) -> Callable[[Optional[bytes]], Any]:
        loader = self._decoders.get((part, typ, serializer))
        if loader is None:
            loader = self._decoders[(part, typ, serializer)] = self._new_loader(part, typ, serializer)
        return loader

    def _new_loader(self, part: str, typ: Any, serializer: Any) -> Callable[[Optional[bytes]], Any]:
        faust_loads = getattr(self._registry, f"loads_{part}")

        def by_faust(raw: Optional[bytes]) -> Any:
            return faust_loads(typ, raw, serializer=serializer)

        fast = self._fast_decoder(part, typ, serializer)
        if fast is None:
            return by_faust
        checked = refused = False

        def loads(raw: Optional[bytes]) -> Any:
            nonlocal checked, refused
            if raw is not None and not refused:  # refused: callers holding this loader decode as Faust does too
                value = fast(raw)
                if value is not UNHANDLED:
                    if checked:
                        return value
                    checked = True
                    expected = by_faust(raw)
                    if _same(value, expected):
                        return value
                    log.warning("Decoding %ss of %s (%s) the fast way gave %r where Faust gives %r: using Faust's",
                                part, getattr(typ, "__name__", typ), serializer, value, expected)
                    refused = True
                    self._decoders[(part, typ, serializer)] = by_faust
                    return expected
            return by_faust(raw)

        return loads

    def _fast_decoder(self, part: str, typ: Any, serializer: Any) -> Optional[Decoder]:
        """The direct way to decode raw bytes of this type as the registry would; None if there is none."""
        if part == "key":
            serializer = serializer or self._registry.key_serializer
        else:
            serializer = self._resolved_serializer(part, typ, serializer)
        raw_payload = not serializer or (serializer == "raw" and self._raw)
        if not raw_payload and not (serializer == "json" and self._json):
            return None
        prepare = self._preparer(typ)
        if prepare is None or raw_payload:
            return prepare

        def decode_json(raw: bytes) -> Any:
            try:
                payload = orjson.loads(raw)
            except orjson.JSONDecodeError:  # Faust raises its own error for it
                return UNHANDLED
            return prepare(payload)

        return decode_json

    def _preparer(self, typ: Any) -> Optional[Callable[[Any], Any]]:
        """What turns a decoded payload into the type the registry would give; None if only Faust knows."""
        if typ is None:
            return _untyped
        if typ is str:
            return want_str
        if typ is bytes:
            return want_bytes
        if typ is int or typ is float:
            return lambda payload: typ(want_str(payload))
        fields = faust_internals.plain_record_fields(typ)
        if fields is None:
            return None
        return _record_builder(typ, fields)


_BY_REGISTRY: "weakref.WeakKeyDictionary[Any, Codecs]" = weakref.WeakKeyDictionary()


def _as_bytes(value: Any) -> Optional[bytes]:
    return want_bytes(value) if value is not None else None


def _unchanged(value: Any) -> Any:
    return value


def _json_plain(by_faust: Encoder) -> Encoder:
    def encode(value: Any) -> Optional[bytes]:
        try:
            return orjson.dumps(value, option=FAUST_JSON_OPTIONS)
        except TypeError:  # an int beyond 64 bits: Faust's codec decides
            return by_faust(value)

    return encode


def _json_record(by_faust: Encoder) -> Encoder:
    def encode(record: Any) -> Optional[bytes]:
        try:
            return orjson.dumps(record.to_representation(), option=FAUST_JSON_OPTIONS)
        except TypeError:  # a field holding what orjson does not know: Faust's codec turns it into JSON
            return by_faust(record)

    return encode


def _plain_record_json(cls: type, fields: tuple[str, ...], by_faust: Encoder) -> Encoder:
    """Encodes a plain record of ``cls`` as :func:`_json_record` does, from a copy of its attributes.

    Faust's representation is the fields in order, then the namespace: a record
    whose attributes are its evaluated-fields marker then exactly its fields in
    order (as every record Faust or :func:`faust_eos.new_record` builds) is copied
    as it is; any other goes through Faust's representation.
    """
    attributes = ("__evaluated_fields__", *fields)
    namespace = {"ns": faust_internals.model_namespace(cls)} if faust_internals.model_includes_namespace(cls) else None

    by_representation = _json_record(by_faust)

    def encode(record: Any) -> Optional[bytes]:
        state = record.__dict__
        if tuple(state) != attributes:
            return by_representation(record)
        payload = state.copy()
        del payload["__evaluated_fields__"]
        if namespace is not None:
            payload["__faust"] = namespace
        try:
            return orjson.dumps(payload, option=FAUST_JSON_OPTIONS)
        except TypeError:
            return by_faust(record)

    return encode


def _untyped(payload: Any) -> Any:
    # the registry rebuilds a model from a payload naming one (its "__faust" key)
    if type(payload) is dict and "__faust" in payload:
        return UNHANDLED
    return payload


def _record_builder(cls: type, fields: tuple[str, ...]) -> Callable[[Any], Any]:
    """Builds a plain record of ``cls`` from a payload holding exactly its fields (and its own namespace)."""
    own_namespace = {"ns": faust_internals.model_namespace(cls)}
    field_set = frozenset(fields)
    build = faust_internals.build_record

    def prepare(payload: Any) -> Any:
        if type(payload) is not dict:
            return UNHANDLED
        namespace = payload.pop("__faust", own_namespace)
        if namespace != own_namespace or None in payload.values():
            return UNHANDLED  # another model named, defaults to apply: Faust's rules
        if tuple(payload) == fields:  # as Faust and this layer write them
            return build(cls, fields, payload, in_order=True)
        if payload.keys() != field_set:
            return UNHANDLED  # fields missing or extra: Faust's rules
        return build(cls, fields, payload)

    return prepare


def _same(a: Any, b: Any) -> bool:
    """Whether two decoded values are the same to anyone reading them."""
    return type(a) is type(b) and a == b and getattr(a, "__dict__", None) == getattr(b, "__dict__", None)
