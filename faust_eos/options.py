"""The options of an ``eos://`` broker URL, and the Faust settings the layer refuses.

Options go in the URL's query, as in ``eos://host:9092?transaction_timeout_ms=30000&max_uncommitted_records=50000``;
each is a positive whole number, and a bad one is refused with what was expected.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from faust_eos.errors import SettingRefused

#: a transaction nobody ends is aborted by the broker after this long. A worker lost inside one (never
#: restarted on its directory, so never claiming its id again) holds back every read_committed reader of
#: the partitions it wrote, and the next owner of its input, until then: short, as Kafka Streams' 10 s
DEFAULT_TRANSACTION_TIMEOUT_MS = 10_000
DEFAULT_MAX_UNCOMMITTED_RECORDS = 20_000
DEFAULT_FETCH_MAX_WAIT_MS = 20
#: a fetch returns once this much of its partitions' records is there, or after the fetch wait. With
#: aiokafka's 1 byte, input arriving steadily was fetched a few records at a time, as fast as requests
#: went round: at 1,000 events/s the consumer's thread kept 0.4 of a core busy, and a worker used about
#: 2 to 2.5 times the CPU per event it uses with this (docs/performance-history.md). A backlog fills it at once.
FETCH_MIN_BYTES = 64 * 1024
#: Python's garbage collector looks for reference cycles among the newest objects each time this many more
#: were made than freed (Python's own: 700). A worker keeps every event, record and staged output between
#: commits alive: with 700, collections of them took a fifth to a quarter of an ordinary app's event loop
#: (docs/performance-history.md). Objects in cycles wait a little longer to be freed.
DEFAULT_GC_THRESHOLD = 50_000


def transaction_timeout_ms(broker_urls: Iterable[Any], commit_interval_s: float) -> int:
    """``eos://...?transaction_timeout_ms=30000``: how long the broker lets one of this app's
    transactions stay open before aborting it; at most the brokers' ``transaction.max.timeout.ms``.

    Default: :data:`DEFAULT_TRANSACTION_TIMEOUT_MS`, or three commit intervals if that is longer.
    """
    return _broker_url_option(broker_urls, "transaction_timeout_ms",
                              default_transaction_timeout_ms(commit_interval_s * 1000), "milliseconds, e.g. 10000")


def default_transaction_timeout_ms(commit_interval_ms: float) -> int:
    """The transaction timeout for this commit interval when none is set: 10 s, or three intervals if longer."""
    return max(DEFAULT_TRANSACTION_TIMEOUT_MS, math.ceil(3 * commit_interval_ms))


def max_uncommitted_records(broker_urls: Iterable[Any]) -> int:
    """``eos://...?max_uncommitted_records=50000``: how many records (outputs and table writes) may
    wait for their commit (a transaction; under at-least-once, an offset commit) before one starts early."""
    return _broker_url_option(broker_urls, "max_uncommitted_records", DEFAULT_MAX_UNCOMMITTED_RECORDS,
                              "a count of records, e.g. 100000")


def fetch_max_wait_ms(broker_urls: Iterable[Any]) -> int:
    """``eos://...?fetch_max_wait_ms=100``: how long one fetch may wait at the broker for records to arrive.

    A fetch asks for every partition with no fetched records waiting to be processed, and
    the next one goes out only once it returns. While the input's records wait, a fetch
    asks only for the other partitions, such as a ``read_committed`` topic whose next
    records are still in an open transaction, and the broker holds it this long: new input
    waits behind it. Faust's own 1,500 ms held the input of a two-hop pipeline about a
    second, several times a minute; each idle fetch costs the broker one request.
    """
    return _broker_url_option(broker_urls, "fetch_max_wait_ms", DEFAULT_FETCH_MAX_WAIT_MS,
                              "milliseconds, e.g. 100")


def gc_threshold(broker_urls: Iterable[Any]) -> int:
    """``eos://...?gc_threshold=700``: the first-generation threshold of Python's garbage collector that a
    worker sets as it starts (700 keeps Python's own)."""
    return _broker_url_option(broker_urls, "gc_threshold", DEFAULT_GC_THRESHOLD, "a count of objects, e.g. 700")


def _broker_url_option(broker_urls: Iterable[Any], name: str, default: int, hint: str) -> int:
    for url in broker_urls:
        if name in url.query:
            value = url.query[name]
            if not value.isdigit() or int(value) == 0:
                raise ValueError(f"{name}={value!r} in the broker URL: expected {hint}")
            return int(value)
    return default


def refuse_settings_that_bypass_transactions(conf: Any) -> None:
    """Raise :class:`SettingRefused` for a Faust setting under which records would skip their event's transaction."""
    if conf.stream_publish_on_commit:
        raise SettingRefused(
            "stream_publish_on_commit=True makes Faust send an event's records when offsets commit, outside the "
            "event, so they could not commit with it: leave it off under exactly_once (the records are held "
            "until their transaction commits anyway)"
        )
