"""Readers take the records a consumer holds as they come: they never wait for a batch to fill."""
from kafka_ops.records import ready_records


class QueuedConsumer:
    """A confluent-kafka consumer with ``queued`` records ready, recording how long each call may wait."""

    def __init__(self, queued: list[str]) -> None:
        self.queued = queued
        self.waits: list[tuple[str, float]] = []

    def poll(self, timeout: float):
        self.waits.append(("poll", timeout))
        return self.queued.pop(0) if self.queued else None

    def consume(self, num_messages: int, timeout: float):
        self.waits.append(("consume", timeout))
        taken, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        return taken


def test_the_first_record_is_waited_for_and_the_rest_taken_as_they_are():
    consumer = QueuedConsumer(["a", "b", "c"])
    assert ready_records(consumer, timeout=0.1) == ["a", "b", "c"]
    assert consumer.waits == [("poll", 0.1), ("consume", 0)]


def test_no_record_within_the_timeout_is_an_empty_list():
    consumer = QueuedConsumer([])
    assert ready_records(consumer, timeout=0.1) == []
    assert consumer.waits == [("poll", 0.1)]


def test_at_most_most_records_are_taken():
    consumer = QueuedConsumer([str(n) for n in range(10)])
    assert ready_records(consumer, timeout=0.1, most=4) == ["0", "1", "2", "3"]
    assert consumer.queued == ["4", "5", "6", "7", "8", "9"]
