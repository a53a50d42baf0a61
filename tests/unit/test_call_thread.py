"""CallThread: the thread each producer's calls run on."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from faust_eos.committing.produce import CallThread


def run(coro):
    return asyncio.run(coro)


def test_calls_run_in_order_and_return_their_results():
    thread = CallThread("test")
    order: list[int] = []
    futures = [thread.submit(order.append, i) for i in range(5)]
    assert [f.result(5) for f in futures] == [None] * 5
    assert order == [0, 1, 2, 3, 4]
    assert thread.submit(lambda a, b: a + b, 2, 3).result(5) == 5
    thread.close()


def test_an_exception_reaches_the_caller():
    thread = CallThread("test")
    with pytest.raises(ZeroDivisionError):
        thread.submit(lambda: 1 / 0).result(5)
    assert thread.submit(lambda: "still serving").result(5) == "still serving"
    thread.close()


def test_a_call_queued_behind_a_stuck_one_is_dropped_when_its_caller_gives_up():
    thread = CallThread("test")
    release = threading.Event()
    ran: list[str] = []
    thread.submit(release.wait)

    async def give_up() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.wrap_future(thread.submit(ran.append, "late")), 0.1)

    run(give_up())
    release.set()
    assert thread.submit(lambda: "after").result(5) == "after"
    assert ran == []
    thread.close()


def test_a_stuck_call_does_not_keep_the_process_alive():
    program = (
        "import threading\n"
        "from faust_eos.committing.produce import CallThread\n"
        "CallThread('stuck').submit(threading.Event().wait)\n"
        "print('done')\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.strip() == "done"
