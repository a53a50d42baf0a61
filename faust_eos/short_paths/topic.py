"""The topic class for apps on ``eos://``: ``faust.App(..., Topic=faust_eos.Topic)``, and what an app's
topics of Faust's own class become as its worker starts (:mod:`faust_eos.short_paths.adoption`).

A send through Faust's topic awaits the app's producer through a guard
against concurrent starts, which yields to the event loop three times per
send even once the producer runs, and wraps the record in a future of its
own before the producer sees it. Inside a batch (:mod:`faust_eos.short_paths.batches`)
that is most of what a send costs. This topic encodes the record as Faust
would and stages it at once where it commits: with the transaction manager
under exactly-once, with its event's held records under at-least-once
(:mod:`faust_eos.committing.at_least_once`). Faust's send sensors still see each send
(Faust's own monitor, which only counts and times sends, without the record).
Until the transaction manager runs, sends with a ``callback``, and sends
outside events under at-least-once take Faust's path.

Iterated by streams, such a topic takes its records a fetched batch at a time
and its queue hands them out as an event per record (:mod:`faust_eos.short_paths.unpacking`).
A topic with the :class:`~faust_eos.short_paths.batches.Batches` schema buffers, unless
built with its own ``maxsize``, as many records for its agents as Faust buffers
events (``stream_buffer_maxsize``), not that many batches: memory stays as
Faust's, and a rebalance waits for as few records to finish.
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, cast

import faust
from faust.types import CodecArg, HeadersArg, RecordMetadata, SchemaT
from faust.types.tuples import MessageSentCallback, PendingMessage

from faust_eos.codec import Codecs, codecs_of
from faust_eos.committing.guarantee import Guarantee
from faust_eos.faust_internals import TopicHooks
from faust_eos.short_paths.batches import Batch, Batches
from faust_eos.short_paths.event_path import EventPath, EventPathsOwner
from faust_eos.short_paths.unpacking import Decode, UnpackingQueue

if TYPE_CHECKING:
    import asyncio

    from faust_eos.state.staging import OutputStager


class Topic(TopicHooks):
    """A Faust topic whose sends reach a running producer without yielding to the event loop."""

    def __init__(self, app: Any, *, schema: Optional[SchemaT[Any, Any]] = None, maxsize: Optional[int] = None,
                 **kwargs: Any) -> None:
        if maxsize is None and isinstance(schema, Batches):
            maxsize = max(1, app.conf.stream_buffer_maxsize // schema.max_records)
        super().__init__(app, schema=schema, maxsize=maxsize, **kwargs)

    async def producer_for_sends(self) -> Any:
        app = self.app
        if app.in_transaction and app.consumer.transactions.started:
            return app.consumer.transactions
        if not app.in_transaction and app.producer.started:
            return app.producer
        return await super().producer_for_sends()

    async def send(
        self,
        *,
        key: Any = None,
        value: Any = None,
        partition: Optional[int] = None,
        timestamp: Optional[float] = None,
        headers: Optional[HeadersArg] = None,
        schema: Optional[SchemaT[Any, Any]] = None,
        key_serializer: Optional[CodecArg] = None,
        value_serializer: Optional[CodecArg] = None,
        callback: Optional[MessageSentCallback] = None,
        force: bool = False,
    ) -> Awaitable[RecordMetadata]:
        """Send as Faust does; with no ``callback``, staged directly where the record commits."""
        app = self.app
        worker = cast(EventPathsOwner, app.consumer) if callback is None and app.in_worker else None
        path = worker.event_paths.current() if worker is not None else None
        staging: Optional[Guarantee]
        if path is not None:
            if (headers is None and schema is None and key_serializer is None and value_serializer is None
                    and not path.sensors_read_records):
                plain = self.__dict__.get("_plain_sends")
                if plain is None or not plain.serves(path, self.schema):
                    plain = self.__dict__["_plain_sends"] = PlainSends(self, path)
                if plain.send is not None:
                    return plain.send(path, key, value, partition, timestamp)
            staging = path.staging
        else:
            staging = worker.staging_for_sends() if worker is not None else None
        if staging is None:
            return await super().send(key=key, value=value, partition=partition, timestamp=timestamp,
                                      headers=headers, schema=schema, key_serializer=key_serializer,
                                      value_serializer=value_serializer, callback=callback, force=force)
        raw_key, raw_value, open_headers = self._encoded(key, value, headers, schema, key_serializer, value_serializer)
        topic = self.get_topic_name()
        if path is None:  # outside events under exactly-once: the worker's own transactions
            return await self._send_outside_events(staging, topic, raw_key, raw_value, partition, timestamp,
                                                   open_headers, key_serializer, value_serializer)
        stage: OutputStager = staging.output_stager(topic)
        if not path.send_sensors:
            return stage(path, raw_key, raw_value, partition, timestamp, open_headers)
        message = PendingMessage(self, raw_key, raw_value, key_serializer=key_serializer,
                                 value_serializer=value_serializer, partition=partition, timestamp=timestamp,
                                 headers=open_headers, callback=None, topic=topic,
                                 offset=None) if path.sensors_read_records else None
        completed = sensed_send(path.send_sensors, staging, topic, message, raw_key, raw_value)
        return stage(path, raw_key, raw_value, partition, timestamp, open_headers, completed,
                     path.sensors_read_records)

    def unpacks_batches(self) -> bool:
        """Whether this channel takes fetched batches and hands out an event per record
        (:mod:`faust_eos.short_paths.unpacking`): every topic of this class but those with the
        :class:`~faust_eos.short_paths.batches.Batches` schema."""
        return not isinstance(self.schema, Batches)

    def new_queue(self) -> Optional[UnpackingQueue]:
        if not self.unpacks_batches():
            return None
        maxsize = self.maxsize if self.maxsize is not None else self.app.conf.stream_buffer_maxsize
        return UnpackingQueue(self._record_decoder(), maxsize=maxsize, flow_control=self.app.flow_control,
                              clear_on_resume=True)

    def decoder(self, faust_decode: Callable[..., Any]) -> Callable[..., Any]:
        """Faust's decoding, but for a batch to unpack: its event's value is the batch (its queue unpacks it)."""
        if not self.unpacks_batches():
            return faust_decode
        create_event = _event_maker(self.app)

        async def decode(message: Any, *, propagate: bool = False) -> Any:
            if isinstance(message.value, Batch):
                return create_event(None, message.value, (), message)
            return await faust_decode(message, propagate=propagate)
        return decode

    def _record_decoder(self) -> Decode:
        """What decodes a record of a batch into the event Faust's own decoding would make of it."""
        app, schema = self.app, self.schema
        create_event, allow_empty = _event_maker(app), schema.allow_empty
        if _decodes_as_faust_schema(schema):
            codecs = self.codecs()
            loads_key = codecs.key_loader(schema.key_type, schema.key_serializer)
            loads_raw_value = codecs.value_loader(schema.value_type, schema.value_serializer)

            def decode(message: Any) -> Any:
                raw = message.value
                value = None if raw is None and allow_empty else loads_raw_value(raw)
                return create_event(loads_key(message.key), value, message.headers, message)
            return decode
        serializers = app.serializers

        def decode_by_schema(message: Any) -> Any:
            key = schema.loads_key(app, message, loads=serializers.loads_key)
            value = (None if message.value is None and allow_empty
                     else schema.loads_value(app, message, loads=serializers.loads_value))
            return create_event(key, value, message.headers, message)
        return decode_by_schema

    def codecs(self) -> Codecs:
        """The app's codecs (:class:`faust_eos.codec.Codecs`), looked up once."""
        codecs = self.__dict__.get("_codecs")
        if codecs is None:
            codecs = self.__dict__["_codecs"] = codecs_of(self.app)
        return codecs

    async def _send_outside_events(self, staging: Any, topic: str, raw_key: Any, raw_value: Any,
                                   partition: Optional[int], timestamp: Optional[float], headers: Any,
                                   key_serializer: Optional[CodecArg],
                                   value_serializer: Optional[CodecArg]) -> Awaitable[RecordMetadata]:
        sensors = self.app.sensors
        state = sensors.on_send_initiated(
            staging, topic,
            message=PendingMessage(self, raw_key, raw_value, key_serializer=key_serializer,
                                   value_serializer=value_serializer, partition=partition, timestamp=timestamp,
                                   headers=headers, callback=None, topic=topic, offset=None),
            keysize=len(raw_key) if raw_key else 0, valsize=len(raw_value) if raw_value else 0,
        )
        committed: asyncio.Future[RecordMetadata] = await staging.send(topic, raw_key, raw_value, partition, timestamp,
                                                                      headers)
        committed.add_done_callback(lambda done: _report(sensors, staging, state, done))
        return committed

    def _encoded(self, key: Any, value: Any, headers: Optional[HeadersArg], schema: Optional[SchemaT[Any, Any]],
                 key_serializer: Optional[CodecArg], value_serializer: Optional[CodecArg]) -> tuple[Any, Any, Any]:
        """Key, value and headers as Faust's topic prepares them for its producer."""
        open_headers = self.prepare_headers(headers) if headers is not None else {}
        schema = schema or self.schema
        if not _encodes_as_faust_schema(schema):
            raw_key, open_headers = self.prepare_key(key, key_serializer, schema, open_headers)
            raw_value, open_headers = self.prepare_value(value, value_serializer, schema, open_headers)
            return raw_key, raw_value, open_headers
        codecs = self.codecs()
        raw_key = (None if key is None
                   else codecs.dumps_key(schema.key_type, key, key_serializer or schema.key_serializer))
        raw_value = codecs.dumps_value(schema.value_type, value, value_serializer or schema.value_serializer)
        return raw_key, raw_value, open_headers


def _decodes_as_faust_schema(schema: Any) -> bool:
    """Whether ``schema`` decodes keys and values as ``faust.Schema`` does: then the app's codecs do it."""
    kind = type(schema)
    return all(getattr(kind, name) is getattr(faust.Schema, name) for name in ("loads_key", "loads_value", "decode"))


def _encodes_as_faust_schema(schema: Any) -> bool:
    """Whether ``schema`` encodes keys and values as ``faust.Schema`` does: then the app's codecs do it."""
    kind = type(schema)
    plain = _PLAIN_SCHEMAS.get(kind)
    if plain is None:
        plain = _PLAIN_SCHEMAS[kind] = all(
            getattr(kind, name) is getattr(faust.Schema, name)
            for name in ("dumps_key", "dumps_value", "on_dumps_key_prepare_headers", "on_dumps_value_prepare_headers")
        )
    return plain


_PLAIN_SCHEMAS: dict[type, bool] = {}


class PlainSends:
    """This topic's sends inside events with nothing but a key, a value, a partition and a timestamp, the
    common case: their topic name, encoding, staging and sensors are worked out once here, not per send.

    Kept by the topic while the events it sends in stage into the same place with the same sensors, and
    its schema encodes as it did (Faust updates a schema in place when a topic is derived from it);
    ``send`` is None where such sends take the general path (a schema that encodes its own way).
    """

    def __init__(self, topic: Topic, path: EventPath) -> None:
        schema = self.schema = topic.schema
        self.staging = path.staging
        self.sensors = path.send_sensors
        self.key_type, self.key_serializer = schema.key_type, schema.key_serializer
        self.value_type, self.value_serializer = schema.value_type, schema.value_serializer
        self.send: Optional[Callable[..., Awaitable[RecordMetadata]]] = None
        if not _encodes_as_faust_schema(schema):
            return
        name = topic.get_topic_name()
        stage: OutputStager = self.staging.output_stager(name)
        codecs = topic.codecs()
        encode_key = codecs.encoder("key", schema.key_type, schema.key_serializer)
        encode_value = codecs.encoder("value", schema.value_type, schema.value_serializer)
        staging, sensors = self.staging, self.sensors
        monitor = sensors[0] if len(sensors) == 1 else None  # most often Faust's own monitor alone
        send_completed: Any = monitor.on_send_completed if monitor is not None else None

        def send(path: EventPath, key: Any, value: Any, partition: Optional[int],
                 timestamp: Optional[float]) -> Awaitable[RecordMetadata]:
            raw_key = None if key is None else encode_key(key)
            raw_value = encode_value(value)
            if monitor is not None:
                state = monitor.on_send_initiated(staging, name, None, len(raw_key) if raw_key else 0,
                                                  len(raw_value) if raw_value else 0)
                return stage(path, raw_key, raw_value, partition, timestamp, None,
                             partial(send_completed, staging, state))
            if not sensors:
                return stage(path, raw_key, raw_value, partition, timestamp)
            return stage(path, raw_key, raw_value, partition, timestamp, None,
                         sensed_send(sensors, staging, name, None, raw_key, raw_value))

        self.send = send

    def serves(self, path: EventPath, schema: SchemaT[Any, Any]) -> bool:
        """Whether a plain send in the event of ``path``, with the topic's ``schema``, may take these: staged in the
        same place, seen by the same sensors, encoded the same way."""
        return (path.staging is self.staging and path.send_sensors == self.sensors and schema is self.schema
                and schema.key_type is self.key_type and schema.value_type is self.value_type
                and schema.key_serializer == self.key_serializer and schema.value_serializer == self.value_serializer)


def sensed_send(sensors: tuple[Any, ...], producer: Any, topic: str, message: Optional[PendingMessage], raw_key: Any,
                raw_value: Any) -> Callable[[RecordMetadata], None]:
    """Tell ``sensors`` a send is initiated, as Faust's topic does; what tells them it completed."""
    keysize, valsize = len(raw_key) if raw_key else 0, len(raw_value) if raw_value else 0
    if len(sensors) == 1:  # most often Faust's own monitor alone
        sensor = sensors[0]
        return partial(sensor.on_send_completed, producer,
                       sensor.on_send_initiated(producer, topic, message, keysize, valsize))
    states = [(sensor, sensor.on_send_initiated(producer, topic, message, keysize, valsize)) for sensor in sensors]

    def completed(metadata: RecordMetadata) -> None:
        for sensor, state in states:
            sensor.on_send_completed(producer, state, metadata)

    return completed


def _report(sensors: Any, producer: Any, state: Any, done: Any) -> None:
    """Tell Faust's sensors how a send ended, as Faust's own topic does once its record is durable."""
    if done.cancelled():
        return
    if done.exception() is not None:
        sensors.on_send_error(producer, done.exception(), state)
    else:
        sensors.on_send_completed(producer, state, done.result())


def _event_maker(app: Any) -> Callable[[Any, Any, Any, Any], Any]:
    """``app.create_event``, without its lookup of the app's ``Event`` setting per event unless the app
    makes its events itself."""
    if type(app).create_event is not faust.App.create_event:
        return cast(Callable[[Any, Any, Any, Any], Any], app.create_event)
    return partial(app.conf.Event, app)
