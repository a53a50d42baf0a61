"""Kafka operations: a wire client, offsets, topics and transactions on a live cluster.

Takes bootstrap servers and plain arguments; depends only on confluent-kafka
and the standard library (:mod:`kafka_ops.wire` on the standard library
alone, so the broker script can use it before the virtualenv has packages).
Nothing of the pipeline, its config, the harness or the benchmarks is imported.
"""
