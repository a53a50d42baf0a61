"""The exactly-once layer stands alone: any Faust app can use ``eos://``."""
import asyncio
import gc
import subprocess
import sys

import faust
import pytest
from faust_contract_support import worker_app

from faust_eos import LocalStateNotWritten, SettingRefused, StoreRefused
from faust_eos.consuming.consumer import Consumer
from faust_eos.options import (
    DEFAULT_FETCH_MAX_WAIT_MS,
    DEFAULT_GC_THRESHOLD,
    DEFAULT_MAX_UNCOMMITTED_RECORDS,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    default_transaction_timeout_ms,
    fetch_max_wait_ms,
    gc_threshold,
    max_uncommitted_records,
    refuse_settings_that_bypass_transactions,
    transaction_timeout_ms,
)
from faust_eos.state.table_state import TableState


def test_importing_the_transport_builds_no_app_and_reads_no_environment():
    program = (
        "import sys\n"
        "import faust_eos.transport\n"
        "loaded = [m for m in ('config', 'app.pipeline', 'agents', 'tables', 'app.metrics') if m in sys.modules]\n"
        "print(','.join(loaded) or 'none')\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"


def test_another_app_gets_the_eos_transport_from_its_broker_url():
    other = faust.App("someone-elses-app", broker="eos://localhost:9092", processing_guarantee="exactly_once")
    assert other.transport.__class__.__module__ == "faust_eos.transport"


def broker_urls(url: str) -> list:
    return faust.App("x", broker=url).conf.broker


def test_transaction_timeout_defaults_to_ten_seconds():
    assert transaction_timeout_ms(broker_urls("eos://localhost:9092"), 2.8) == DEFAULT_TRANSACTION_TIMEOUT_MS == 10_000


def test_transaction_timeout_defaults_to_three_commit_intervals_when_they_are_longer():
    assert transaction_timeout_ms(broker_urls("eos://localhost:9092"), 5.0) == 15_000
    assert default_transaction_timeout_ms(3333.5) == 10_001


def test_transaction_timeout_is_read_from_the_broker_url():
    assert transaction_timeout_ms(broker_urls("eos://localhost:9092?transaction_timeout_ms=30000"), 2.8) == 30_000
    assert transaction_timeout_ms(broker_urls("eos://h1:9092;h2:9092?transaction_timeout_ms=5000"), 2.8) == 5_000


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "soon", ""])
def test_a_bad_transaction_timeout_is_refused_with_its_value(value):
    with pytest.raises(ValueError, match="transaction_timeout_ms"):
        transaction_timeout_ms(broker_urls(f"eos://localhost:9092?transaction_timeout_ms={value}"), 2.8)


def test_the_uncommitted_records_limit_defaults_to_twenty_thousand_and_is_read_from_the_broker_url():
    assert max_uncommitted_records(broker_urls("eos://localhost:9092")) == DEFAULT_MAX_UNCOMMITTED_RECORDS == 20_000
    assert max_uncommitted_records(broker_urls("eos://localhost:9092?max_uncommitted_records=500")) == 500
    with pytest.raises(ValueError, match="max_uncommitted_records='lots'"):
        max_uncommitted_records(broker_urls("eos://localhost:9092?max_uncommitted_records=lots"))


def test_a_fetch_waits_at_most_twenty_milliseconds_unless_the_broker_url_says_otherwise():
    assert fetch_max_wait_ms(broker_urls("eos://localhost:9092")) == DEFAULT_FETCH_MAX_WAIT_MS == 20
    assert fetch_max_wait_ms(broker_urls("eos://localhost:9092?fetch_max_wait_ms=500")) == 500
    with pytest.raises(ValueError, match="fetch_max_wait_ms='0'"):
        fetch_max_wait_ms(broker_urls("eos://localhost:9092?fetch_max_wait_ms=0"))


def test_the_garbage_collector_s_threshold_is_fifty_thousand_unless_the_broker_url_says_otherwise():
    assert gc_threshold(broker_urls("eos://localhost:9092")) == DEFAULT_GC_THRESHOLD == 50_000
    assert gc_threshold(broker_urls("eos://localhost:9092?gc_threshold=700")) == 700
    with pytest.raises(ValueError, match="gc_threshold='-1'"):
        gc_threshold(broker_urls("eos://localhost:9092?gc_threshold=-1"))


def test_a_worker_sets_the_garbage_collector_s_first_threshold_as_it_starts_and_keeps_the_others():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 11, 12)
        app = worker_app(broker="eos://localhost:9092?gc_threshold=1234")
        assert app.consumer is not None  # made as the worker starts
        assert gc.get_threshold() == (1234, 11, 12)
    finally:
        gc.set_threshold(*before)


def test_publishing_records_at_commit_time_is_refused_under_exactly_once():
    conf = faust.App("x", broker="eos://localhost:9092", stream_publish_on_commit=True).conf
    with pytest.raises(SettingRefused, match="stream_publish_on_commit=True"):
        refuse_settings_that_bypass_transactions(conf)
    refuse_settings_that_bypass_transactions(faust.App("y", broker="eos://localhost:9092").conf)


@pytest.mark.parametrize("store", ["rocksdb://", "memory://"])
def test_under_exactly_once_every_table_needs_the_store_that_holds_only_committed_state(tmp_path, store):
    app = faust.App("x", broker="eos://localhost:9092", datadir=str(tmp_path), store=store)
    app.Table("counts", default=int)
    with pytest.raises(StoreRefused, match="table 'counts' is on a store that writes before its transaction commits"):
        TableState(app.tables.values())
    assert TableState(app.tables.values(), other_stores_allowed=True).stores == {}

    fixed = faust.App("y", broker="eos://localhost:9092", datadir=str(tmp_path), store="eos-rocksdb://")
    fixed.Table("plain", default=int)
    fixed.Table("expiring", default=int).tumbling(10, expires=60)
    assert set(TableState(fixed.tables.values()).stores) == {"y-plain-changelog", "y-expiring-changelog"}


class CommitFails:
    """A consumer running an early commit whose commit raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.crashed_with = None
        self._early_commit = "running"

    async def commit(self) -> None:
        raise self.error

    async def crash(self, reason: BaseException) -> None:
        self.crashed_with = reason


def early_commit_with(error: Exception) -> CommitFails:
    consumer = CommitFails(error)
    asyncio.run(Consumer._commit_early(consumer))
    assert consumer._early_commit is None
    return consumer


def test_an_early_commit_whose_local_state_cannot_be_written_stops_the_worker():
    error = LocalStateNotWritten("disk full")
    assert early_commit_with(error).crashed_with is error


def test_an_early_commit_that_fails_otherwise_leaves_it_to_the_next_interval():
    assert early_commit_with(RuntimeError("broker away")).crashed_with is None
