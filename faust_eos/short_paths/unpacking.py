"""Per-record events for ordinary streams, at the cost of one Faust dispatch per fetched batch.

Faust hands every fetched record to the streams on its own: its fetch loop
starts a task for each record, the conductor decodes it and puts an event in
each subscribed channel's queue, with flow control and acknowledgement
bookkeeping around each step. That is most of what an ordinary per-event agent
costs before its own code runs.

On ``eos://`` the consumer hands a topic's fetched records out in batches (as
one message per batch, :mod:`faust_eos.short_paths.batches`) when every channel subscribed
to the topic is a :class:`faust_eos.Topic` that unpacks them. Such a channel's
queue (:class:`UnpackingQueue`) unpacks each batch event as it is put: one
event per record, decoded by the channel's schema, each with a message of its
own (:class:`RecordMessage`). From there Faust's own stream takes the events as
it takes any: its processors, ``take``, ``group_by``, ``current_event``,
acknowledgements and sensors are Faust's.

A batch is acknowledged once every stream is done with every one of its
records; until then a commit reaches its first record some stream is not done
with. The records a rebalance clears from the queues are never done: the
partition's next positioning fetches them again.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterator, Optional, cast

from faust.exceptions import DecodeError
from faust.types.tuples import ConsumerMessage
from mode.utils.queues import ThrowableQueue

from faust_eos import faust_internals
from faust_eos.short_paths.batches import Batch, log_undecodable


class BatchProgress:
    """Which records of one batch event, in one channel, are done; the event is acknowledged once all are.

    Until then a commit may reach the first record not done (:func:`first_record_not_done`):
    the records before it, and all they caused, commit as a record-by-record stream's
    would. An agent whose work spans partitions (a ``take`` chunk) then commits all of
    it at once, whichever batches its records came in.
    """

    __slots__ = ("event", "offsets", "done", "reached")

    def __init__(self, event: Any, offsets: list[int]) -> None:
        self.event = event
        self.offsets = offsets  # of the records this channel hands out, ascending
        self.done: set[int] = set()
        self.reached = 0  # how many of ``offsets``, from the first, are done
        batch: Batch = event.message.value
        batch.unpacked.append(self)
        if not offsets:
            self._all_done(batch)

    def record_done(self, offset: int) -> None:
        offsets, done = self.offsets, self.done
        done.add(offset)
        while self.reached < len(offsets) and offsets[self.reached] in done:
            self.reached += 1
        if self.reached == len(offsets):
            self._all_done(self.event.message.value)

    def _all_done(self, batch: Batch) -> None:
        # no commit asks any more (the batch is acknowledged once every channel is done); and the batch,
        # its records and its events are freed as soon as nothing else holds them
        batch.unpacked.remove(self)
        self.event.ack()

    def first_not_done(self) -> Optional[int]:
        """The offset of this channel's first record not done; None once all are."""
        return self.offsets[self.reached] if self.reached < len(self.offsets) else None


def first_record_not_done(batch_message: Any) -> Optional[int]:
    """The offset of the first record of an unpacked batch that some channel is not done with; None if the
    message was not unpacked, or every channel is done."""
    batch = getattr(batch_message, "value", None)
    if not isinstance(batch, Batch):
        return None
    pending = [offset for progress in batch.unpacked if (offset := progress.first_not_done()) is not None]
    return min(pending) if pending else None


class RecordMessage(ConsumerMessage):
    """One record of a batch, as Faust's consumer makes a message of it, telling its batch when it is acknowledged.

    Faust marks a message acknowledged by setting its ``acked`` (its stream
    iterator does so without calling any method of the message): here that
    setting is watched.
    """

    progress: Optional[BatchProgress] = None
    _done = False

    def ack(self, consumer: Any, n: int = 1) -> bool:
        # Faust's own ack also files each record's offset in the consumer's ack lists,
        # which decide nothing for a record of a batch (its batch's progress does)
        if self._done:
            return False
        self.refcount = max(self.refcount - n, 0)
        if self.refcount:
            return False
        self.acked = True
        faust_internals.acknowledged(consumer, self)
        return True

    @property
    def acked(self) -> bool:
        return self._done

    @acked.setter
    def acked(self, done: bool) -> None:
        if done and not self._done and self.progress is not None:
            self.progress.record_done(self.offset)
        self._done = done


def record_messages(batch_message: Any) -> Iterator[RecordMessage]:
    """A message per record of the batch ``batch_message`` stands for, as Faust's consumer builds them."""
    generation = batch_message.generation_id
    for record in batch_message.value.records:
        yield RecordMessage(
            record.topic, record.partition, record.offset,
            # None without a timestamp, as Faust's consumer passes it
            cast(float, record.timestamp / 1000.0 if record.timestamp is not None else None), record.timestamp_type,
            record.headers, record.key, record.value, record.checksum, record.serialized_key_size,
            record.serialized_value_size, batch_message.tp, generation_id=generation,
        )


#: decodes one record's message into the event a channel hands out; raises DecodeError if it cannot
Decode = Callable[[RecordMessage], Any]


class UnpackingQueue(ThrowableQueue[Any]):
    """A channel's queue of events that puts each batch event in as the events of its records, in order."""

    _queue: deque[Any]  # asyncio.Queue's own

    def __init__(self, decode: Decode, **queue: Any) -> None:
        super().__init__(**queue)
        self._decode = decode

    def _put(self, item: Any) -> None:
        if isinstance(getattr(item, "value", None), Batch):
            self._queue.extend(self._unpacked(item))
        else:
            self._queue.append(item)

    def _unpacked(self, batch_event: Any) -> list[Any]:
        events = []
        for message in record_messages(batch_event.message):
            try:
                event = self._decode(message)
            except DecodeError as exc:
                log_undecodable(message, exc)
                continue
            events.append(event)
        progress = BatchProgress(batch_event, [event.message.offset for event in events])
        for event in events:
            event.message.progress = progress
        return events
