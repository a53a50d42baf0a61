"""Records sent outside events: what each way a round ends does with them and with the producer."""
from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import KafkaError, KafkaException

from faust_eos.committing.outside import OutsideEventSends
from faust_eos.committing.transaction import ProducerFenced, TransactionFailed, TransactionStuck
from faust_eos.state.staging import StagedRecord


class Transaction:
    """A producer of the worker's own id: commits, or raises what it is told, once."""

    def __init__(self, failure: BaseException | None = None, *, claim_fails: bool = False) -> None:
        self.failure, self.claim_fails = failure, claim_fails
        self.transactional_id = "app-outside-w1"
        self.committed: list[bytes] = []
        self.closed = False

    async def init(self) -> None:
        if self.claim_fails:
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))

    async def commit(self, records, offsets=None, group=None):
        if self.failure is not None:
            raise self.failure
        self.committed += [record.value for record in records]
        return [f"md-{record.value.decode()}" for record in records]

    def close(self) -> None:
        self.closed = True


def sends(*transactions: Transaction) -> tuple[OutsideEventSends, list[Transaction]]:
    made: list[Transaction] = []
    queue = list(transactions)

    def new_transaction() -> Transaction:
        made.append(queue.pop(0))
        return made[-1]

    return OutsideEventSends(new_transaction), made


def record(value: bytes) -> StagedRecord:
    return StagedRecord(topic="out", key=None, value=value, partition=None, timestamp_ms=None, headers=None,
                        source_offset=-1)


@pytest.mark.parametrize("failure", [TransactionFailed("aborted"), TransactionStuck("no answer")],
                         ids=["failed", "stuck"])
def test_a_round_that_did_not_commit_sends_its_records_again_from_a_new_producer(failure):
    outside, made = sends(Transaction(failure), Transaction())
    outside.add(record(b"a"))
    assert asyncio.run(outside.commit()) is False
    assert made[0].closed and len(outside) == 1
    assert asyncio.run(outside.commit()) is True
    assert len(made) == 2 and made[1].committed == [b"a"] and len(outside) == 0


def test_a_fenced_round_drops_its_records():
    outside, made = sends(Transaction(ProducerFenced("another process on this data directory")))
    outside.add(record(b"a"))
    assert asyncio.run(outside.commit()) is False
    assert made[0].closed and len(outside) == 0


def test_records_wait_while_the_id_cannot_be_claimed():
    outside, made = sends(Transaction(claim_fails=True), Transaction())
    outside.add(record(b"a"))
    assert asyncio.run(outside.commit()) is False
    assert made[0].closed and len(outside) == 1
    assert asyncio.run(outside.commit()) is True and made[1].committed == [b"a"]
