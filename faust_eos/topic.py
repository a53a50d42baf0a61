"""The topic class for apps on ``eos://``: ``faust.App(..., Topic=faust_eos.Topic)``.

Every send of a Faust topic first awaits the app's producer through a guard
against concurrent starts, which yields to the event loop three times per
send, even once the producer runs. Inside a batch (:mod:`faust_eos.batches`)
those yields are most of what a send costs. This topic takes the started
producer directly and keeps Faust's path for the first sends.
"""
from __future__ import annotations

from typing import Any

from faust_eos.faust_internals import TopicHooks


class Topic(TopicHooks):
    """A Faust topic whose sends reach a running producer without yielding to the event loop."""

    async def producer_for_sends(self) -> Any:
        app = self.app
        if app.in_transaction and app.consumer.transactions.started:
            return app.consumer.transactions
        if not app.in_transaction and app.producer.started:
            return app.producer
        return await super().producer_for_sends()
