"""Records sent outside any input event: by timers, crontabs, web views, window-close callbacks.

Such a record has no input offsets to commit with, so it cannot join an input
partition's transaction. Each worker commits these records in transactions of
a producer of its own, ``<app id>-outside-<worker id>``, once per commit
round: every record sent outside an event since the previous round commits
with the others, atomically, or none of them does. ``send_and_wait`` commits
at once and returns when its record is committed.

The worker id is kept in the worker's data directory, so a worker restarted on
the same directory fences its paused predecessor's producer.

What can happen to a round, and the one thing done about it:

* the transaction failed and was aborted: the records wait for the next round,
  sent by a new producer (librdkafka may reuse a failed transaction's sequence
  numbers on the same one);
* the producer could not claim the id: the records wait for the next round;
* the producer was fenced (another process runs on this data directory): the
  records are dropped, their futures never resolve, and the next round starts
  a new producer (which fences the other process in turn);
* a call did not return in time: the outcome is unknown; the producer is
  dropped and the records are sent again by a new one, which aborts the old
  transaction if it had not committed, and otherwise duplicates it.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Callable, Optional

from aiokafka.structs import RecordMetadata
from confluent_kafka import KafkaException

from faust_eos.committing.transaction import (
    ProducerFenced,
    TransactionalProducer,
    TransactionFailed,
    TransactionStuck,
    claimed,
)
from faust_eos.state.staging import StagedRecord

log = logging.getLogger(__name__)

WORKER_ID_FILE = "eos-worker-id"


def worker_id(datadir: Path) -> str:
    """This worker's id: made once, then kept in ``datadir``."""
    path = datadir / WORKER_ID_FILE
    if not path.exists():
        datadir.mkdir(parents=True, exist_ok=True)
        path.write_text(uuid.uuid4().hex[:12])
    return path.read_text().strip()


def outside_transactional_id(app_id: str, worker: str) -> str:
    return f"{app_id}-outside-{worker}"


class OutsideEventSends:
    """Records sent outside any event, and the producer that commits them."""

    def __init__(self, new_transaction: Callable[[], TransactionalProducer]) -> None:
        self._new_transaction = new_transaction
        self._transaction: Optional[TransactionalProducer] = None
        self._pending: list[StagedRecord] = []
        self._committing = asyncio.Lock()

    def add(self, record: StagedRecord) -> None:
        self._pending.append(record)

    def __len__(self) -> int:
        return len(self._pending)

    async def commit(self) -> bool:
        """Commit every record sent so far in one transaction; False if they must wait."""
        async with self._committing:
            if not self._pending:
                return True
            records, self._pending = self._pending, []
            try:
                transaction = await self._producer()
                metadata = await transaction.commit(records)
            except KafkaException as exc:  # the producer could not claim the id: it is asked again next time
                log.warning("Records sent outside an event will be committed later: %s", exc)
                self._pending[:0] = records
                return False
            except ProducerFenced as exc:
                log.warning("Dropped %d records sent outside an event: %s", len(records), exc)
                self._close()
                return False
            except (TransactionFailed, TransactionStuck) as exc:
                # a failed transaction's producer is not used again (librdkafka may reuse its sequence numbers)
                log.warning("Sending %d records sent outside an event again, from a new producer: %s",
                            len(records), exc)
                self._close()
                self._pending[:0] = records
                return False
            for record, md in zip(records, metadata):
                record.on_committed(md)
            return True

    async def send_and_wait(self, record: StagedRecord) -> RecordMetadata:
        """Commit ``record`` (with whatever else waits) now; its metadata once committed."""
        committed: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        on_committed = record.on_committed

        def resolve(metadata: RecordMetadata) -> None:
            on_committed(metadata)
            committed.set_result(metadata)

        record.on_committed = resolve
        self.add(record)
        while True:
            await self.commit()
            # every round ends with the record committed, waiting again, or dropped
            if committed.done():
                return committed.result()
            if not any(waiting is record for waiting in self._pending):
                raise ProducerFenced(f"a record for {record.topic!r} was dropped: the producer was fenced")
            await asyncio.sleep(0.1)  # a failed round: try again soon

    async def _producer(self) -> TransactionalProducer:
        if self._transaction is None:
            transaction = self._transaction = await claimed(self._new_transaction())
            log.info("Claimed %s for records sent outside an event", transaction.transactional_id)
        return self._transaction

    def _close(self) -> None:
        if self._transaction is not None:
            self._transaction.close()
            self._transaction = None

    def close(self) -> None:
        """Drop the producer; records not committed yet are dropped with it."""
        if self._pending:
            log.warning("Dropped %d records sent outside an event: the worker stops", len(self._pending))
            self._pending.clear()
        self._close()
