"""Reading the records a consumer holds now, without waiting for ones that are not there."""
from __future__ import annotations

from confluent_kafka import Consumer, Message

#: ``fetch.wait.max.ms`` for a reader that reads to the end of its partitions: how long the broker
#: holds a fetch that finds nothing new. The end of a partition (librdkafka's end-of-partition
#: event) is only known from such a fetch, so each read to the end waits this long (the default: 500)
END_READER_FETCH_WAIT_MS = 50


def ready_records(consumer: Consumer, timeout: float, most: int = 1000) -> list[Message]:
    """The records ``consumer`` holds now, up to ``most``, waiting at most ``timeout`` for the first.

    ``consume(most, timeout)`` returns early only once it has ``most`` records:
    with fewer queued it waits out the whole ``timeout``, so a reader at the end
    of its partitions would be up to ``timeout`` late with every read.
    """
    first = consumer.poll(timeout)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, timeout=0)]
