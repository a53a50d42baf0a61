"""The topics the pipeline reads and writes."""
from __future__ import annotations

from agents.models import MerchantTotal, Payment, WindowTotal
from app import app
from config import settings
from faust_eos import Batches

#: raw bytes, keyed by customer_id: validated by the pipeline, never trusted; read in batches
payments = app.topic(settings.input_topic, partitions=settings.partitions,
                     schema=Batches(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"))
#: valid, first-seen payments re-keyed by merchant_id (the repartition step); read in batches
payments_by_merchant = app.topic(settings.by_merchant_topic, partitions=settings.partitions, internal=True,
                                 schema=Batches(key_type=str, value_type=Payment))
merchant_totals = app.topic(settings.totals_topic, key_type=str, value_type=MerchantTotal,
                            partitions=settings.partitions, internal=True)
window_totals = app.topic(settings.windows_topic, key_type=str, value_type=WindowTotal,
                          partitions=settings.partitions, internal=True)
#: rejected input: original key and bytes, the reason and the source in headers
dead_letters = app.topic(settings.dlq_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                         value_serializer="raw", partitions=settings.partitions, internal=True)
