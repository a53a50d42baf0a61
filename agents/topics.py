"""The topics the pipeline reads and writes."""
from __future__ import annotations

from agents.models import MerchantTotal, Payment, WindowTotal
from app import app
from config import settings

#: raw bytes, keyed by customer_id: validated by the pipeline, never trusted
payments = app.topic(settings.input_topic, key_type=bytes, value_type=bytes, value_serializer="raw",
                     key_serializer="raw", partitions=settings.partitions)
#: valid, first-seen payments re-keyed by merchant_id (the repartition step)
payments_by_merchant = app.topic(settings.by_merchant_topic, key_type=str, value_type=Payment,
                                 partitions=settings.partitions, internal=True)
merchant_totals = app.topic(settings.totals_topic, key_type=str, value_type=MerchantTotal,
                            partitions=settings.partitions, internal=True)
window_totals = app.topic(settings.windows_topic, key_type=str, value_type=WindowTotal,
                          partitions=settings.partitions, internal=True)
#: rejected input: original key and bytes, the reason and the source in headers
dead_letters = app.topic(settings.dlq_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                         value_serializer="raw", partitions=settings.partitions, internal=True)
