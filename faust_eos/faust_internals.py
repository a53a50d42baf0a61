"""Every private part of Faust and aiokafka that faust-eos touches, in one place.

No release of those libraries promises to keep what is named here, so faust-eos
accepts only the releases it was tested with (:func:`require_tested_versions`,
called when this module is imported, before any of it is used), and the tests
``tests/unit/test_faust_contract*.py`` check each behaviour relied on against the
installed Faust. The rest of the library uses Faust's public names, or these helpers.

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

import functools
import importlib.metadata
import math
import sys
import weakref
from typing import Any, AsyncGenerator, Callable, Iterable, Mapping, MutableMapping, Optional, cast

import faust
from faust import streams as faust_streams
from faust.models import fields as faust_fields
from faust.stores import rocksdb
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.types.models import ModelT
from faust.utils import json as faust_json
from mode import Service
from mode.utils.futures import notify

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


class ConsumerHooks(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer with the private hooks faust-eos overrides under public names.

    Each hook defaults to Faust's own behaviour; a subclass overrides the public
    name and calls ``super()`` for Faust's.
    """

    async def _getmany(self, active_partitions: Optional[set[TP]], timeout: float) -> Mapping[TP, list[Any]]:
        return await self.fetch_batch(active_partitions, timeout)

    async def fetch_batch(self, active_partitions: Optional[set[TP]], timeout: float) -> Mapping[TP, list[Any]]:
        """One fetch from the broker: records per partition, before Faust hands them out."""
        return await super()._getmany(active_partitions, timeout)

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        await self.note_gap(tp, offset_from, offset_to)

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return ConsumerThreadHooks(self, loop=self.loop, beacon=self.beacon)

    def fetch_wait_ms(self) -> Optional[int]:
        """How long one fetch may wait at the broker for records; None keeps Faust's (1,500 ms)."""
        return None

    def fetch_min_bytes(self) -> Optional[int]:
        """How many bytes of records a fetch waits for at the broker (up to the fetch wait); None keeps
        aiokafka's (1)."""
        return None

    async def note_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        """Offsets ``offset_from`` to ``offset_to`` of ``tp`` hold no record for the streams."""
        await super()._add_gap(tp, offset_from, offset_to)

    def _filter_committable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self.committable_offsets(tps)

    def committable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Per partition of ``tps``, the offset the next commit may reach (only those that moved)."""
        return super()._filter_committable_offsets(tps)

    async def _seek(self, partition: TP, offset: int) -> None:
        await self.seek_partition(partition, offset)

    async def seek_partition(self, tp: TP, offset: int) -> None:
        """Move the fetch position of ``tp``; every seek Faust makes comes here."""
        await super()._seek(tp, offset)

    @Service.task
    async def _commit_handler(self) -> None:
        await self.run_commit_timer()

    async def run_commit_timer(self) -> None:
        """Run the timer commits while the consumer runs (Faust's: a commit, then a whole ``commit_interval``)."""
        await super()._commit_handler(self)

    async def _commit(self, offsets: Mapping[TP, int]) -> bool:
        return await self.commit_to_group(offsets)

    async def commit_to_group(self, offsets: Mapping[TP, int]) -> bool:
        """Commit ``offsets`` to the consumer group, outside any transaction; True if accepted."""
        return await super()._commit(offsets)

    # -- the aiokafka consumer and its thread ------------------------------------
    def aiokafka_consumer(self) -> Any:
        """The aiokafka consumer Faust drives; call into it only on its thread."""
        return self._thread._ensure_consumer()

    async def call_on_consumer_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the consumer's own thread, where its fetches run."""
        return await self._thread.call_thread(fn, *args)

    def request_rejoin(self) -> None:
        """Make the group rebalance soon."""
        coordinator = self.aiokafka_consumer()._coordinator
        self._thread.thread_loop.call_soon_threadsafe(coordinator.request_rejoin)

    def group_membership(self) -> tuple[int, str]:
        """This worker's generation and member id in the group (-1 and "" while it is not a member)."""
        coordinator = self.aiokafka_consumer()._coordinator
        return coordinator.generation, coordinator.member_id

    def refresh_metadata(self) -> None:
        """Ask the broker for fresh topic metadata soon."""
        client = self.aiokafka_consumer()._client
        self._thread.thread_loop.call_soon_threadsafe(client.force_metadata_update)

    def topics_missing_from_metadata(self) -> list[str]:
        """The group's subscribed topics that the consumer's last metadata gave no partitions."""
        snapshot = self.aiokafka_consumer()._coordinator._metadata_snapshot
        return sorted(topic for topic, partitions in snapshot.items() if not partitions)


class ConsumerThreadHooks(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread, building the worker's aiokafka consumer with the consumer's fetch wait and size."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # both read once, by the fetcher its start() builds
        hooks = cast(ConsumerHooks, self.consumer)  # the consumer whose _new_consumer_thread made this thread
        wait_ms, min_bytes = hooks.fetch_wait_ms(), hooks.fetch_min_bytes()
        if wait_ms is not None:
            consumer._fetch_max_wait_ms = wait_ms
        if min_bytes is not None:
            consumer._fetch_min_bytes = min_bytes
        return consumer


class TopicHooks(faust.Topic):
    """Faust's topic with the private hook faust-eos overrides under a public name."""

    async def _get_producer(self) -> Any:
        return await self.producer_for_sends()

    async def producer_for_sends(self) -> Any:
        """The producer (under exactly-once: the transaction manager) a send of this topic goes to."""
        return await super()._get_producer()

    def _compile_decode(self) -> None:
        super()._compile_decode()
        cast(Any, self).decode = self.decoder(self.decode)  # Faust sets it as an attribute, over its method

    def decoder(self, faust_decode: Callable[..., Any]) -> Callable[..., Any]:
        """What decodes each record this topic is handed (``faust_decode``: Faust's for its schema)."""
        return faust_decode

    @property
    def queue(self) -> Any:
        if self._queue is None:
            self._queue = self.new_queue()
        return super().queue

    def new_queue(self) -> Any:
        """The queue of events made for this channel on first use; None makes Faust's own."""
        return None


class StreamHooks(faust.Stream[Any]):
    """Faust's stream with the private parts an iterator of its own needs, under public names."""

    _processors: list[Callable[[Any], Any]]  # Faust's: always a list

    @property
    def processors(self) -> list[Callable[[Any], Any]]:
        """The processors each value goes through before the stream hands it out (``add_processor``)."""
        return self._processors

    def begin_iterating(self, iterator: AsyncGenerator[Any, None]) -> None:
        """Note that ``iterator`` iterates this stream: no processor may be added now, and it is closed when the
        stream stops."""
        self._finalized = True
        self._active_agens.add(iterator)

    def set_current_event(self, event: Any) -> None:
        """Make ``event`` (or None) this stream's and this task's current event (``faust.current_event()``)."""
        self._set_current_event(event)


def set_task_event(event: Any) -> None:
    """Make ``event`` (or None) the current task's event (``faust.current_event()``), leaving every stream's as is."""
    faust_streams._current_event.set(None if event is None else weakref.ref(event))


def reads_no_offset(callback: Any) -> bool:
    """Whether ``callback``, given to the future of a record sent, is Faust's own for a send without a callback
    of its own: it only hands the record's metadata to the send's ``FutureMessage`` and to the sensors, and
    none of Faust's sensors reads the offset (a sensor of the app's own is watched for apart)."""
    if not isinstance(callback, functools.partial) or getattr(callback.func, "__func__", None) is not _ON_PUBLISHED:
        return False
    sent = callback.keywords.get("message")
    return sent is not None and sent.message.callback is None


_ON_PUBLISHED = faust.Topic._on_published


def compile_decode(topic: Any) -> None:
    """Make ``topic``'s ``decode`` again (after its class changed: :mod:`faust_eos.short_paths.adoption`)."""
    topic._compile_decode()


def committed_offsets(consumer: Any) -> MutableMapping[TP, Optional[int]]:
    """The offsets Faust recorded as committed, per partition (it records them after each commit round)."""
    offsets: MutableMapping[TP, Optional[int]] = consumer._committed_offset
    return offsets


def acknowledged(consumer: Any, message: Any) -> None:
    """What Faust's consumer must learn of a message acknowledged without its ack lists: it counts
    towards ``broker_commit_every``, and a worker waiting for its streams to finish waits no more for it."""
    consumer._n_acked += 1
    consumer._unacked_messages.discard(message)
    notify(consumer._waiting_for_ack)


def forget_acks_below(consumer: Any, tp: TP, offset: int) -> None:
    """Drop Faust's acknowledgements of ``tp`` below ``offset``: they decide nothing any more."""
    acked = consumer._acked[tp]
    acked[:] = [acked_offset for acked_offset in acked if acked_offset >= offset]
    consumer._acked_index[tp].intersection_update(acked)


def table_partition_dbs(store: Any) -> Optional[Mapping[int, Any]]:
    """A RocksDB store's open database per table partition; None for other stores."""
    return getattr(store, "_dbs", None)


#: values a read may share with the write it reads: immutable, and JSON gives them back as they were
IMMUTABLE = (str, int, float, bool)


def shareable(value: Any) -> bool:
    """Whether ``value`` is a str, int, finite float or bool: a read may be handed the written object itself."""
    kind = type(value)
    return kind in IMMUTABLE and (kind is not float or math.isfinite(value))


def has_changelog_callback(table: Any) -> bool:
    """Whether ``table`` was given an ``on_changelog_event`` callback."""
    return table._on_changelog_event is not None


def close_table_partition(store: Any, partition: int) -> None:
    """Close a RocksDB store's database of ``partition``, if open (it reopens on next use)."""
    db = store._dbs.pop(partition, None)
    if db is not None:
        db.close()


class StoreHooks(rocksdb.Store):
    """Faust's RocksDB store with the private hooks faust-eos overrides under public names.

    Keys and values are bytes, as the changelog carries them. Each hook defaults
    to Faust's own behaviour.
    """

    def _get(self, key: bytes) -> Optional[bytes]:
        return self.read_key(key)

    def read_key(self, key: bytes) -> Optional[bytes]:
        """The value of ``key``, None if absent."""
        return super()._get(key)

    def _contains(self, key: bytes) -> bool:
        return self.holds_key(key)

    def holds_key(self, key: bytes) -> bool:
        return super()._contains(key)

    def _set(self, key: bytes, value: Optional[bytes]) -> None:
        self.write_key(key, value)

    def write_key(self, key: bytes, value: Optional[bytes]) -> None:
        """A table write, called after the table sent the key's changelog record."""
        super()._set(key, value)

    def _del(self, key: bytes) -> None:
        self.delete_key(key)

    def delete_key(self, key: bytes) -> None:
        """A table delete, called after the table sent the key's tombstone (inside an event)."""
        super()._del(key)

    def _iteritems(self) -> Any:
        return self.items_of_active_partitions()

    def items_of_active_partitions(self) -> Any:
        """Every (key, value) of the table partitions this worker serves."""
        return super()._iteritems()

    def _iterkeys(self) -> Any:
        return (key for key, _ in self.items_of_active_partitions())

    def _itervalues(self) -> Any:
        return (value for _, value in self.items_of_active_partitions())

    def _size(self) -> int:
        return sum(1 for _ in self.items_of_active_partitions())

    def partition_db(self, partition: int) -> Any:
        """The database of table partition ``partition``, opened if it is not."""
        return self._db_for_partition(partition)

    def active_partition_dbs(self) -> dict[int, Any]:
        """The open database of each table partition this worker serves actively (all of a global table's)."""
        actives = self.app.assignor.assigned_actives()
        topic = self.table.changelog_topic.get_topic_name()
        return {
            partition: db
            for partition, db in list(self._dbs.items())
            if self.table.is_global or TP(topic, partition) in actives
        }


# -- records -----------------------------------------------------------------------
#: field descriptors that, without coercion, keep the value they are given as it is
_PLAIN_FIELDS = (faust_fields.StringField, faust_fields.IntegerField, faust_fields.FloatField,
                 faust_fields.BooleanField)


def json_codec_is_orjson() -> bool:
    """Whether Faust's json codec encodes and decodes with orjson (it does when orjson is installed)."""
    return cast(Any, faust_json).orjson is not None  # not among the module's exported names


def is_model_class(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, ModelT)


def model_serializer(cls: Any) -> Any:
    """The serializer a model class names for itself (None if it names none)."""
    return cls._options.serializer


def model_namespace(cls: Any) -> str:
    """The name a model's payloads carry under ``"__faust"``."""
    namespace: str = cls._options.namespace
    return namespace


def model_includes_namespace(cls: Any) -> bool:
    """Whether a model's payloads carry its name under ``"__faust"`` (``include_metadata``)."""
    return bool(cls._options.include_metadata)


def plain_record_fields(cls: Any) -> Optional[tuple[str, ...]]:
    """The field names of ``cls``, in order, if it is a plain record (:func:`_plain_fields`); else None."""
    try:
        return _PLAIN_RECORDS[cls]
    except KeyError:
        fields = _PLAIN_RECORDS[cls] = _plain_fields(cls)
        return fields
    except TypeError:  # not hashable: not a class
        return None


def _plain_fields(cls: Any) -> Optional[tuple[str, ...]]:
    """The field names of ``cls``, in order, if it is a record that Faust builds by storing each value as given.

    That is a ``faust.Record`` whose every field is a str, int, float or bool
    field with no coercion, tag, conversion, renaming or exclusion, and that has
    no ``__post_init__`` and no validation; None for any other class.
    """
    if not (isinstance(cls, type) and issubclass(cls, faust.Record)) or hasattr(cls, "__post_init__"):
        return None
    options = cls._options
    if options.validation:
        return None
    for name, field in cast("Mapping[str, faust_fields.FieldDescriptor[Any]]", options.descriptors).items():
        if (type(field) not in _PLAIN_FIELDS or field.coerce or field.tag is not None or field._to_python is not None
                or field.lazy_coercion or field.exclude or field.parent is not None
                or not field.field == field.input_name == field.output_name == name):
            return None
    return tuple(options.descriptors)


_PLAIN_RECORDS: dict[Any, Optional[tuple[str, ...]]] = {}


def build_record(cls: Any, fields: tuple[str, ...], values: dict[str, Any], *, in_order: bool = False) -> Any:
    """A record of ``cls`` holding ``values`` (one per field of ``fields``, the plain record's
    :func:`plain_record_fields`), the same as ``cls(**values)`` builds, without its per-field setters.

    ``in_order``: the caller knows ``values`` name the fields in their order (it is checked otherwise).
    """
    record = cls.__new__(cls)
    if not in_order and tuple(values) != fields:
        values = {name: values[name] for name in fields}
    record.__dict__ = {"__evaluated_fields__": set(), **values}
    return record
