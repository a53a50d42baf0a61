"""Exactly-once for Faust: the transport that replaces Faust's own transaction handling.

Faust keeps doing what it does well (consuming, streams, tables, recovery with
``read_committed`` readers); its consumer (:mod:`faust_eos.consuming.consumer`), the
guarantee it chooses once (:mod:`faust_eos.committing.guarantee`: the transaction manager
of :mod:`faust_eos.committing.exactly_once`, or :mod:`faust_eos.committing.at_least_once`)
and the producers below change four things:

* **Delivery**: each input record is handed to the agents once per ownership
  of its partition, and a commit never passes a record not yet processed
  (:mod:`faust_eos.consuming.delivery`).
* **Sends** made while an agent processes an event are not produced at once:
  they are staged with the event's partition and offset (:mod:`faust_eos.state.staging`).
  Table changelog writes go the same way; records sent outside any event go
  in transactions of the worker's own (:mod:`faust_eos.committing.outside`).
* **Commits** run one transaction per round for every input partition the
  worker owns (:mod:`faust_eos.committing.commit`, :class:`faust_eos.committing.transaction.TransactionalProducer`):
  the staged records of the events being committed, then their offsets, sent
  with the group's generation and member id.
* **Ownership**: the group fences a previous owner: it takes offsets only from
  the member of its current generation. The worker claims its transactional id
  when partitions are assigned, before their offsets are read and their tables
  restored. Before giving partitions up in a rebalance the worker finishes the
  events it holds and commits them, so the next owner starts exactly where this
  one stopped.

Tables (:mod:`faust_eos.state.table_state`, :mod:`faust_eos.state.store`) hold a write in
memory until its transaction commits, then store it with the changelog offset
it brings the table to, so local state never holds an effect that did not
commit and a restore reads only the changelog past that offset, up to its last
committed record (:meth:`faust_eos.committing.offsets.CommittedOffsets.restore_ends`).
Under at-least-once the same staging holds an event's records until its
offset commits, and one producer writes them without a transaction
(:mod:`faust_eos.committing.at_least_once`).
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Optional, cast

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types.tuples import FutureMessage, RecordMetadata

from faust_eos.committing.at_least_once import AtLeastOnce
from faust_eos.committing.exactly_once import TransactionManager
from faust_eos.consuming.consumer import Consumer


class ExactlyOnceProducer(faust_aiokafka.Producer):
    """Faust's producer under exactly_once: every record goes to the transaction manager, and commits in a
    transaction.

    Faust's topics already send through the transaction manager; this covers the
    rest: buffered sends (table changelog writes) and code that calls ``app.producer`` itself.
    """

    def _transactions(self) -> TransactionManager:
        return cast(TransactionManager, self.app.consumer.transactions)

    def send_soon(self, fut: FutureMessage) -> None:
        self._transactions().stage_future_message(fut)

    async def send(self, topic: str, key: Any, value: Any, partition: Optional[int], timestamp: Optional[float],
                   headers: Any, *, transactional_id: Optional[str] = None) -> Awaitable[RecordMetadata]:
        return await self._transactions().send(topic, key, value, partition, timestamp, headers)

    async def send_and_wait(self, topic: str, key: Any, value: Any, partition: Optional[int],
                            timestamp: Optional[float], headers: Any, *,
                            transactional_id: Optional[str] = None) -> RecordMetadata:
        return await self._transactions().send_and_wait(topic, key, value, partition, timestamp, headers)


class AtLeastOnceProducer(faust_aiokafka.Producer):
    """Faust's producer under at_least_once: a record sent inside an event is held until its event's offset
    commits (:mod:`faust_eos.committing.at_least_once`).

    A record sent outside events, or with ``send_and_wait``, goes out at once,
    Faust's way (a write of an ``eos-rocksdb://`` table outside an event waits for
    the next commit).
    """

    def _held(self) -> AtLeastOnce:
        return cast(AtLeastOnce, cast(Consumer, self.app.consumer).guarantee)

    def send_soon(self, fut: FutureMessage) -> None:
        held = self._held()
        if held.stages(fut.message.channel.get_topic_name()):
            held.stage_future_message(fut)
        else:
            super().send_soon(fut)

    async def send(self, topic: str, key: Any, value: Any, partition: Optional[int], timestamp: Optional[float],
                   headers: Any, *, transactional_id: Optional[str] = None) -> Awaitable[RecordMetadata]:
        held = self._held()
        if held.accepts_sends():
            return await held.send(topic, key, value, partition, timestamp, headers)
        sent = await super().send(topic, key, value, partition, timestamp, headers,
                                  transactional_id=transactional_id)
        cast("asyncio.Future[RecordMetadata]", sent).add_done_callback(self._note_failed_output)
        return sent

    def _note_failed_output(self, sent: Any) -> None:
        if not sent.cancelled() and sent.exception() is not None:
            self._held().output_failed(sent.exception())

    async def send_and_wait(self, topic: str, key: Any, value: Any, partition: Optional[int],
                            timestamp: Optional[float], headers: Any, *,
                            transactional_id: Optional[str] = None) -> RecordMetadata:
        # even inside an event: the caller waits for the record, so it goes out now
        sent = await super().send(topic, key, value, partition, timestamp, headers, transactional_id=transactional_id)
        return await sent


class Transport(faust_aiokafka.Transport):
    """``eos://host:port``: Kafka through aiokafka, with exactly-once that holds."""

    Consumer = Consumer
    TransactionManager = TransactionManager

    def create_producer(self, **kwargs: Any) -> faust_aiokafka.Producer:
        """The producer of the app's guarantee (Faust's ``processing_guarantee``)."""
        producer = ExactlyOnceProducer if self.app.in_transaction else AtLeastOnceProducer
        return producer(self, **kwargs)
