"""A worker started on a cluster that has none of the pipeline's topics creates them, as a user's would.

The local broker runs with ``auto.create.topics.enable=false``, like production
clusters: nothing but the worker's start-up creates the topics here (no harness).
"""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

import config
from app.kafka import admin, pipeline_topics
from app.loadgen import LoadSpec, produce
from app.reconcile import reconcile_until_settled
from config import REPO_ROOT
from kafka_ops.topics import partition_counts
from tools.workers import Worker, free_port, wait_for

pytestmark = pytest.mark.broker

START_TIMEOUT_S = 180  # bounds a hang on a busy machine; not a timing check


def test_a_worker_on_a_fresh_cluster_creates_every_pipeline_topic_and_events_reach_every_output(kafka, tmp_path):
    name = uuid.uuid4().hex[:8]
    env = config.child_env(TOPIC_PREFIX=f"fresh-{name}-", APP_ID=f"faust-eos-fresh-{name}", PARTITIONS="3",
                           DATA_DIR=str(tmp_path / "worker"), WEB_PORT=str(free_port()))
    settings = config.load(env)
    topics = pipeline_topics(settings)
    client = admin(settings)
    assert partition_counts(client, topics) == {}

    worker = Worker("worker-0", env, tmp_path / "worker.log")
    worker.start()
    try:
        wait_for(lambda: len(partition_counts(client, topics)) == len(topics), START_TIMEOUT_S,
                 what="the worker to create the pipeline's topics")
        assert partition_counts(client, topics) == {topic: 3 for topic in topics}

        produce(LoadSpec(count=400, seed=11, duplicate_rate=0.05, bad_rate=0.05), settings, progress=False)
        report = reconcile_until_settled(settings, wait_s=START_TIMEOUT_S)
        assert report["ok"], report["problems"]
        assert report["window_updates"] > 0 and report["dead_letters"] > 0
        assert report["dead_letters"] == report["expected_dead_letters"]
    finally:
        assert worker.stop() == 0, worker.log_text()[-3000:]


def test_a_topic_the_cluster_refuses_to_create_stops_the_worker_with_one_line_per_topic(kafka, tmp_path):
    prefix = f"bad!{uuid.uuid4().hex[:8]}-"  # "!" is not allowed in a topic name: CreateTopics refuses each
    env = config.child_env(TOPIC_PREFIX=prefix, APP_ID=f"faust-eos-bad-{uuid.uuid4().hex[:8]}",
                           DATA_DIR=str(tmp_path / "worker"), WEB_PORT=str(free_port()))
    result = subprocess.run([sys.executable, "-m", "faust", "-A", "app", "worker", "-l", "info"], cwd=REPO_ROOT,
                            env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert [line.split(" is missing")[0] for line in lines] == [
        f"error: topic '{topic}'" for topic in sorted(pipeline_topics(config.load(env)))], result.stderr
    assert all("create it with 6 partitions (replication factor 1), or grant this client Create on it"
               in line for line in lines)
