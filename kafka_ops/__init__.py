"""Kafka operations: a wire client, offsets, topics and transactions on a live cluster.

Takes librdkafka client settings (``bootstrap.servers`` and the security
settings, spelled as confluent-kafka takes them) and plain arguments; depends
only on confluent-kafka and the standard library (:mod:`kafka_ops.wire` and
:mod:`kafka_ops.wire_security` on the standard library alone, so the broker
script can use them before the virtualenv has packages).
Nothing of the pipeline, its config, the harness or the benchmarks is imported.
"""
