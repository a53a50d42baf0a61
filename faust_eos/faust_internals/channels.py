"""Topics' and streams' private parts: sends, queues, decoding, the current event.

Each is named, with the reason, in :mod:`faust_eos.faust_internals`.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, AsyncGenerator, Callable, cast

import faust
from faust import streams as faust_streams


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
