"""The topic class for apps on ``eos://``: ``faust.App(..., Topic=faust_eos.Topic)``.

A send through Faust's topic awaits the app's producer through a guard
against concurrent starts, which yields to the event loop three times per
send even once the producer runs, and wraps the record in a future of its
own before the producer sees it. Inside a batch (:mod:`faust_eos.batches`)
that is most of what a send costs. This topic encodes the record as Faust
would and stages it at once where it commits: with the transaction manager
under exactly-once, with its event's held records under at-least-once
(:mod:`faust_eos.at_least_once`). Faust's send sensors still see each send.
Until the transaction manager runs, sends with a ``callback``, and sends
outside events under at-least-once take Faust's path.

A topic with the :class:`~faust_eos.batches.Batches` schema buffers, unless
built with its own ``maxsize``, as many records for its agents as Faust buffers
events (``stream_buffer_maxsize``), not that many batches: memory stays as
Faust's, and a rebalance waits for as few records to finish.
"""
from __future__ import annotations

from typing import Any, Awaitable, Optional

from faust.types import CodecArg, HeadersArg, RecordMetadata, SchemaT
from faust.types.tuples import MessageSentCallback, PendingMessage

from faust_eos.batches import Batches
from faust_eos.faust_internals import TopicHooks


class Topic(TopicHooks):
    """A Faust topic whose sends reach a running producer without yielding to the event loop."""

    def __init__(self, app: Any, *, schema: Optional[SchemaT] = None, maxsize: Optional[int] = None,
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
        schema: Optional[SchemaT] = None,
        key_serializer: Optional[CodecArg] = None,
        value_serializer: Optional[CodecArg] = None,
        callback: Optional[MessageSentCallback] = None,
        force: bool = False,
    ) -> Awaitable[RecordMetadata]:
        """Send as Faust does; with no ``callback``, staged directly where the record commits."""
        app = self.app
        staging = app.consumer.staging_for_sends() if callback is None and app.in_worker else None
        if staging is None:
            return await super().send(key=key, value=value, partition=partition, timestamp=timestamp,
                                      headers=headers, schema=schema, key_serializer=key_serializer,
                                      value_serializer=value_serializer, callback=callback, force=force)
        open_headers = self.prepare_headers(headers)
        raw_key, open_headers = self.prepare_key(key, key_serializer, schema, open_headers)
        raw_value, open_headers = self.prepare_value(value, value_serializer, schema, open_headers)
        topic = self.get_topic_name()
        sensors = app.sensors
        state = sensors.on_send_initiated(
            staging, topic,
            message=PendingMessage(self, raw_key, raw_value, key_serializer=key_serializer,
                                   value_serializer=value_serializer, partition=partition, timestamp=timestamp,
                                   headers=open_headers, callback=None, topic=topic, offset=None),
            keysize=len(raw_key) if raw_key else 0, valsize=len(raw_value) if raw_value else 0,
        )
        committed = await staging.send(topic, raw_key, raw_value, partition, timestamp, open_headers)
        committed.add_done_callback(lambda done: _report(sensors, staging, state, done))
        return committed


def _report(sensors: Any, producer: Any, state: Any, done: Any) -> None:
    """Tell Faust's sensors how a send ended, as Faust's own topic does once its record is durable."""
    if done.cancelled():
        return
    if done.exception() is not None:
        sensors.on_send_error(producer, done.exception(), state)
    else:
        sensors.on_send_completed(producer, state, done.result())
