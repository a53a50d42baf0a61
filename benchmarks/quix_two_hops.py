"""The two hops of :mod:`benchmarks.two_hops` written with Quix Streams, a reference line.

Written as a Quix Streams user would write it: one ``StreamingDataFrame`` parses each
payment (:func:`agents.validation.parse_payment`, rejections dropped), drops a repeat of
an event_id with state kept per input key (a customer: repeats carry the same key),
re-keys by merchant with ``group_by`` (Quix's own repartition topic), keeps each
merchant's running total in state and sends every update to ``merchant-totals``, keyed
and shaped as the Faust app's :class:`~agents.models.MerchantTotal` (``__faust`` included),
so that ``reconcile`` and the benchmark's reader count it alike. Like the Faust app it has
no windows and no dead letters.

It runs in its own virtualenv (``.venv-quix``, built by ``scripts/setup-quix``), started from
the repository's root as ``.venv-quix/bin/python -m benchmarks.quix_two_hops``; its settings
come from :mod:`config`, as a Faust worker's do (the guarantee, the commit interval, the data
dir, the topics). SIGTERM stops it cleanly (Quix Streams commits what it processed).
"""
from __future__ import annotations

import time
from typing import Any, Optional

from quixstreams import Application, State
from quixstreams.kafka import ConnectionConfig

from agents.models import MerchantTotal, Payment
from agents.validation import Rejection, parse_payment
from config import Settings, settings

#: Quix Streams' names of the project's guarantees
GUARANTEES = {"exactly_once": "exactly-once", "at_least_once": "at-least-once"}


def quix_app(config: Settings) -> Application:
    """The two-hop Quix Streams application on ``config``'s broker and topics, under its guarantee."""
    app = Application(
        broker_address=ConnectionConfig.from_librdkafka_dict(config.kafka_client()),
        consumer_group=f"{config.app_id}-quix",
        processing_guarantee=GUARANTEES[config.processing_guarantee],
        commit_interval=config.commit_interval_ms / 1000,
        state_dir=config.data_dir,
        auto_offset_reset="earliest",  # the load may be produced before the group has joined
    )
    payments = app.topic(config.input_topic, key_deserializer="bytes", value_deserializer="bytes")
    totals = app.topic(config.totals_topic, key_serializer="str", value_serializer="json")

    def parse(raw: bytes) -> Optional[Payment]:
        payment = parse_payment(raw, max_bytes=config.max_event_bytes, max_amount_cents=config.max_amount_cents)
        return None if isinstance(payment, Rejection) else payment

    def first_sighting(payment: Payment, state: State) -> bool:
        if state.exists(payment.event_id):  # a repeat, or a conflict: dropped
            return False
        state.set(payment.event_id, {"fingerprint": payment.fingerprint(), "first_seen": time.time()})
        return True

    def add_to_total(payment: dict[str, Any], state: State) -> dict[str, Any]:
        count, amount_cents = state.get("total", (0, 0))
        count, amount_cents = count + 1, amount_cents + payment["amount_cents"]
        state.set("total", (count, amount_cents))
        return MerchantTotal(merchant_id=payment["merchant_id"], count=count, amount_cents=amount_cents,
                             event_id=payment["event_id"]).to_representation()

    sdf = app.dataframe(payments)
    sdf = sdf.apply(parse).filter(lambda payment: payment is not None)
    sdf = sdf.filter(first_sighting, stateful=True)
    sdf = sdf.apply(lambda payment: payment.asdict())
    sdf = sdf.group_by("merchant_id")
    sdf = sdf.apply(add_to_total, stateful=True)
    sdf.to_topic(totals)
    return app


if __name__ == "__main__":
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    quix_app(settings).run()
