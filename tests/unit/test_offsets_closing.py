"""CommittedOffsets can be closed while another thread is waiting on it.

Closing a librdkafka client that another thread is using crashes the process
(a worker stopping during a restore did). Here no broker answers, so a read
keeps retrying until it is told to give up.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from faust.types import TP

from faust_eos.committing.offsets import CommittedOffsets

NOBODY = {"bootstrap.servers": "127.0.0.1:1"}  # refuses connections at once


@pytest.mark.parametrize("call", ["read", "restore_ends"])
def test_closing_makes_a_waiting_call_give_up_instead_of_crashing(call):
    offsets = CommittedOffsets(NOBODY, "closing-test")
    outcome: list[BaseException] = []
    started = threading.Event()

    def wait_on_the_broker() -> None:
        started.set()
        try:
            getattr(offsets, call)([TP("t", 0)], timeout_s=600)
        except KafkaException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=wait_on_the_broker)
    caller.start()
    started.wait()
    time.sleep(1.0)  # let the call reach librdkafka (not a timing check)
    offsets.close()
    caller.join(60)  # bounds a hang; the call gives up at its next step

    assert not caller.is_alive()
    assert [exc.args[0].code() for exc in outcome] == [KafkaError._DESTROY]


def test_after_closing_every_call_gives_up_at_once():
    offsets = CommittedOffsets(NOBODY, "closing-test")
    offsets.close()

    with pytest.raises(KafkaException) as raised:
        offsets.read([TP("t", 0)])
    assert raised.value.args[0].code() == KafkaError._DESTROY
