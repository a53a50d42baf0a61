"""Exactly-once processing for any Faust app.

Enable it on the app: the ``eos://`` transport, the ``eos-rocksdb://`` store,
and exactly-once::

    app = faust.App("my-app", broker="eos://localhost:9092", store="eos-rocksdb://",
                    processing_guarantee="exactly_once")

The store (:mod:`faust_eos.state.store`) holds only committed table state. Both are
registered for Faust when this package is installed, through entry points;
importing :mod:`faust_eos` registers them too. A :class:`Sweep` deletes a
table's expired entries inside the events that write it. A topic with the
:class:`Batches` schema hands its agents whole fetched batches
(:mod:`faust_eos.short_paths.batches`); ``Topic=faust_eos.Topic`` makes their sends cheap
(:mod:`faust_eos.short_paths.topic`), ``Table=faust_eos.Table`` their table reads and
writes (:mod:`faust_eos.short_paths.table`), and ``Stream=faust_eos.Stream`` their iteration
(:mod:`faust_eos.short_paths.stream`): an app on ``eos://`` is given all three as its worker
starts (:mod:`faust_eos.short_paths.adoption`); :func:`new_record` builds the records an
agent makes per event several times faster than their class does. A secured cluster's settings go in
``broker_credentials=faust_eos.credentials({...})`` (:mod:`faust_eos.security`).
How it works: :mod:`faust_eos.transport`; the commit itself:
:mod:`faust_eos.committing.commit` and :mod:`faust_eos.committing.transaction`. What it raises at an
app that asks for something exactly-once cannot do: :mod:`faust_eos.errors`.
"""
from faust.stores import STORES
from faust.transport.drivers import TRANSPORTS

from faust_eos.errors import (
    LocalStateNotWritten,
    MissingTopic,
    OffsetsLost,
    OutputNotWritten,
    SendNotCommittable,
    SettingRefused,
    StoreRefused,
)
from faust_eos.security import credentials
from faust_eos.short_paths.batches import Batch, Batches, BatchRecord
from faust_eos.short_paths.records import new_record
from faust_eos.short_paths.stream import Stream
from faust_eos.short_paths.table import Table
from faust_eos.short_paths.topic import Topic
from faust_eos.state.sweep import Sweep

TRANSPORTS.aliases.setdefault("eos", "faust_eos.transport:Transport")
STORES.aliases.setdefault("eos-rocksdb", "faust_eos.state.store:Store")

__all__ = [
    "Batch", "BatchRecord", "Batches", "LocalStateNotWritten", "MissingTopic", "OffsetsLost", "OutputNotWritten",
    "SendNotCommittable", "SettingRefused", "Stream", "StoreRefused", "Sweep", "Table", "Topic", "credentials",
    "new_record",
]
