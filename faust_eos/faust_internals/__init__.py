"""Every private part of Faust and aiokafka that faust-eos touches, in one place.

No release of those libraries promises to keep what is named here, so faust-eos
accepts only the releases it was tested with (:func:`require_tested_versions`,
called when this package is imported, before any of it is used), and the tests
``tests/unit/test_faust_contract*.py`` check each behaviour relied on against the
installed Faust. The rest of the library uses Faust's public names, or these helpers, imported from
this package (its modules hold them by kind: ``consumer``, ``channels``, ``store``, ``records``).

Private names used, and why:

* ``Consumer._getmany`` (overridden through :meth:`ConsumerHooks.fetch_batch`):
  the one place a fetched batch passes before Faust hands it out.
* ``Consumer._add_gap`` (:meth:`ConsumerHooks.note_gap`): Faust's bookkeeping of
  offsets that hold no record, replaced under exactly-once.
* ``Consumer._filter_committable_offsets`` (:meth:`ConsumerHooks.committable_offsets`):
  how far a commit reaches, decided by the exactly-once delivery ledger instead.
* ``Consumer._seek`` (:meth:`ConsumerHooks.seek_partition`): every seek Faust
  makes, moved onto the consumer's own thread.
* ``Consumer._commit_handler`` (overridden through :meth:`ConsumerHooks.run_commit_timer`):
  the service task that runs Faust's timer commits.
* ``Consumer._commit`` (:meth:`ConsumerHooks.commit_to_group`): an offset commit
  outside transactions, and whether the group accepted it (Faust records the
  offsets as committed either way).
* ``Consumer._committed_offset``: the offsets Faust believes committed
  (:func:`committed_offsets`).
* ``Consumer._acked`` and ``Consumer._acked_index``: Faust's acknowledgement lists,
  kept short when they decide nothing (:func:`forget_acks_below`); and
  ``Consumer._n_acked``, ``_unacked_messages`` and ``_waiting_for_ack``: what the
  consumer must still learn of a record acknowledged without them (:func:`acknowledged`).
* ``Consumer._thread``, with its ``_ensure_consumer()``, ``thread_loop`` and
  ``call_thread``: the aiokafka consumer and the thread it runs on.
* aiokafka's ``AIOKafkaConsumer._coordinator`` (``request_rejoin``, ``generation``,
  ``member_id``, ``_metadata_snapshot``) and ``AIOKafkaConsumer._client``
  (``force_metadata_update``): asking for a rebalance, the worker's membership of the
  group its transactions' offsets are checked against, the subscribed topics the
  consumer's metadata lacks, and fresh metadata.
* ``Consumer._new_consumer_thread`` and ``AIOKafkaConsumerThread._create_worker_consumer``
  (:class:`ConsumerThreadHooks`), with aiokafka's ``AIOKafkaConsumer._fetch_max_wait_ms``
  and ``_fetch_min_bytes``: the worker's aiokafka consumer built with the fetch wait and
  size the consumer asks for (:meth:`ConsumerHooks.fetch_wait_ms`, :meth:`ConsumerHooks.fetch_min_bytes`)
  instead of Faust's fixed 1,500 ms and aiokafka's 1 byte.
* the RocksDB store's ``_get``, ``_set``, ``_del``, ``_contains``, ``_iterkeys``,
  ``_itervalues``, ``_iteritems`` and ``_size`` (overridden through
  :class:`StoreHooks`): every read and write of a table's local state.
* the RocksDB store's ``_dbs`` and ``_db_for_partition``: its open database per
  table partition (:func:`table_partition_dbs`, :meth:`StoreHooks.partition_db`,
  :func:`close_table_partition`).
* a table's ``_on_changelog_event``: whether it was given its own callback
  (:func:`has_changelog_callback`).
* ``Topic._get_producer`` (overridden through :meth:`TopicHooks.producer_for_sends`):
  what every send of a topic awaits for its producer.
* ``Channel._queue`` (through :meth:`TopicHooks.queue`): a channel's queue of events, made
  on first use, made by the topic itself when it asks (:meth:`TopicHooks.new_queue`).
* ``Topic._compile_decode`` (through :meth:`TopicHooks.decoder`, and :func:`compile_decode`):
  it sets the topic's ``decode``, which the conductor calls for each fetched record, as
  an attribute of the topic object.
* ``Topic._on_published``, given with its ``message`` in a ``functools.partial`` to the
  future a producer's ``send`` returns: told apart from other callbacks of that future,
  as it reads no record's offset unless the send had a callback of its own
  (:func:`reads_no_offset`).
* ``Stream._processors``, ``Stream._finalized``, ``Stream._set_current_event`` and
  ``Stream._active_agens`` (through :class:`StreamHooks`): what a stream iterator of
  its own (:mod:`faust_eos.short_paths.stream`) applies to each value, marks as the stream's
  current event, and registers for closing when the stream stops; and
  ``faust.streams._current_event``, the context variable behind ``current_event()``
  (:func:`set_task_event`): the event a ``take`` chunk is handled inside.
* a record class's ``_options`` (its serializer, namespace, field descriptors,
  validation) and its descriptors' ``coerce``, ``tag``, ``_to_python``,
  ``lazy_coercion``, ``exclude`` and names; that a record keeps each field's value
  in its ``__dict__`` under the field's name, after ``__evaluated_fields__``; and
  that Faust's json codec runs on orjson (``faust.utils.json.orjson``): records
  decoded without Faust's per-field setters (:func:`plain_record_fields`,
  :func:`build_record`, :mod:`faust_eos.codec`).
"""
from __future__ import annotations

import importlib.metadata
import sys
from typing import Callable, Optional

#: the releases faust-eos was tested with; any other is refused at start
TESTED_VERSIONS = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0"}


def untested_versions(version_of: Callable[[str], str] = importlib.metadata.version) -> Optional[str]:
    """One line naming the installed releases that differ from the tested ones, or None."""
    wrong = []
    for package, tested in TESTED_VERSIONS.items():
        try:
            installed = version_of(package)
        except importlib.metadata.PackageNotFoundError:
            installed = "not installed"
        if installed != tested:
            wrong.append(f"{package} {installed} (tested: {tested})")
    if not wrong:
        return None
    pins = " ".join(f"{package}=={tested}" for package, tested in TESTED_VERSIONS.items())
    return (
        f"faust-eos relies on private parts of Faust and aiokafka and was tested only with other releases: "
        f"{', '.join(wrong)}: install {pins}"
    )


def require_tested_versions() -> None:
    """Stop the process with one line on stderr (exit status 1) if Faust or aiokafka is untested."""
    problem = untested_versions()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr, flush=True)
        raise SystemExit(1)


require_tested_versions()

from faust_eos.faust_internals.channels import StreamHooks, TopicHooks, compile_decode, reads_no_offset, set_task_event  # noqa: E402  (after the version check)
from faust_eos.faust_internals.consumer import (  # noqa: E402  (after the version check)
    ConsumerHooks,
    ConsumerThreadHooks,
    acknowledged,
    committed_offsets,
    forget_acks_below,
)
from faust_eos.faust_internals.records import (  # noqa: E402  (after the version check)
    build_record,
    is_model_class,
    json_codec_is_orjson,
    model_includes_namespace,
    model_namespace,
    model_serializer,
    plain_record_fields,
)
from faust_eos.faust_internals.store import (  # noqa: E402  (after the version check)
    IMMUTABLE,
    StoreHooks,
    close_table_partition,
    has_changelog_callback,
    shareable,
    table_partition_dbs,
)

__all__ = [
    "ConsumerHooks",
    "ConsumerThreadHooks",
    "IMMUTABLE",
    "StoreHooks",
    "StreamHooks",
    "TESTED_VERSIONS",
    "TopicHooks",
    "acknowledged",
    "build_record",
    "close_table_partition",
    "committed_offsets",
    "compile_decode",
    "forget_acks_below",
    "has_changelog_callback",
    "is_model_class",
    "json_codec_is_orjson",
    "model_includes_namespace",
    "model_namespace",
    "model_serializer",
    "plain_record_fields",
    "reads_no_offset",
    "require_tested_versions",
    "set_task_event",
    "shareable",
    "table_partition_dbs",
    "untested_versions",
]
