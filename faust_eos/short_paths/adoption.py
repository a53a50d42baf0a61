"""An app on ``eos://`` gets the library's short paths without asking for them.

A Faust app written as Faust's documentation teaches it builds its topics and
tables of Faust's own classes, at import, before anything of faust-eos runs.
Their sends and table reads and writes then take Faust's per-operation path: a
future, a pending message and the registry's encoding per send, a changelog
send per table write. :func:`adopt` gives such an app the library's classes
when its worker starts, before any agent runs:

* the app's ``Topic``, ``Table`` and ``Stream`` settings, left at Faust's own
  classes, become :class:`faust_eos.Topic`, :class:`faust_eos.Table` and
  :class:`faust_eos.short_paths.stream.Stream`, so that topics, tables and streams (each
  agent's among them) made from then on are the library's;
* each topic, table and stream already made of exactly Faust's own class becomes an
  instance of the library's subclass. The subclasses add short paths and keep
  no state of their own beyond caches, so an object made by Faust's class is a
  sound instance of theirs. Faust keeps no list of the topics an app made, so
  they and the tables are found among the process's objects, once; objects the
  app froze out of the garbage collector's sight (``gc.freeze()``) included.

A class of the app's own (a subclass of Faust's, or another setting) is left as it is.
"""
from __future__ import annotations

import gc
import logging
import warnings
from typing import Any

import faust

from faust_eos.faust_internals import compile_decode
from faust_eos.short_paths.stream import Stream
from faust_eos.short_paths.table import Table
from faust_eos.short_paths.topic import Topic

log = logging.getLogger(__name__)

#: Faust's own classes, and the library's subclass each is adopted as
ADOPTED: dict[type, type] = {faust.Topic: Topic, faust.Table: Table, faust.Stream: Stream}


def adopt(app: Any) -> int:
    """Give ``app`` the library's topic, table and stream classes, for what it made and will make; how many
    objects changed class."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Faust warns that objects made before keep the old class: handled below
        if app.conf.Topic is faust.Topic:
            app.conf.Topic = Topic
        if app.conf.Table is faust.Table:
            app.conf.Table = Table
        if app.conf.Stream is faust.Stream:
            app.conf.Stream = Stream
    adopted = 0
    for obj in _all_tracked_objects():
        library_class = ADOPTED.get(type(obj))  # exactly Faust's own class: a subclass is the app's
        if library_class is not None and obj.app is app:
            obj.__class__ = library_class
            if library_class is Topic:
                compile_decode(obj)  # a topic's decoding is made as it is built: made again, the library's way
            adopted += 1
    if adopted:
        log.info("%d topics, tables and streams of Faust's own classes take faust-eos's short paths", adopted)
    return adopted


def _all_tracked_objects() -> list[Any]:
    """Every object the garbage collector tracks, the frozen ones too (which ``gc.get_objects()`` leaves out);
    frozen again after, with what was made since they were frozen."""
    frozen = gc.get_freeze_count() > 0
    if frozen:
        gc.unfreeze()
    try:
        return gc.get_objects()
    finally:
        if frozen:
            gc.freeze()
