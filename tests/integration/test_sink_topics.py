"""Topics an exactly-once app sends to exist before its first transaction needs them, or it stops saying why.

The local broker does not create topics on use, as production clusters do not.
"""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from app.kafka import admin, producer_config
from kafka_ops.topics import partition_counts
from tools.workers import free_port, wait_for

pytestmark = pytest.mark.broker

APP = '''
import faust

app = faust.App("{app_id}", broker="eos://{bootstrap}", processing_guarantee="exactly_once",
                store="eos-rocksdb://", datadir="{datadir}", topic_partitions=2, topic_replication_factor=1,
                topic_allow_declare={allow_declare}, broker_commit_interval=0.2, web_port={web_port})
requests = app.topic("{requests}", key_serializer="raw", value_serializer="raw")
answers = app.topic("{answers}", key_serializer="raw", value_serializer="raw")


@app.agent(requests)
async def answer(stream):
    async for request in stream:
        await answers.send(key=b"answer", value=request)
'''


def run_app(kafka, tmp_path, *, allow_declare: bool) -> tuple[subprocess.Popen, str, str]:
    suffix = uuid.uuid4().hex[:6]
    requests_topic, answers_topic = f"sink-requests-{suffix}", f"sink-answers-{suffix}"
    client = admin(kafka)
    for future in client.create_topics([NewTopic(requests_topic, num_partitions=2, replication_factor=1)]).values():
        future.result(30)
    (tmp_path / "sinks.py").write_text(APP.format(
        app_id=f"sinks-{suffix}", bootstrap=kafka.bootstrap_servers, datadir=tmp_path / "data",
        web_port=free_port(), requests=requests_topic, answers=answers_topic, allow_declare=allow_declare))
    log = tmp_path / "worker.log"
    with open(log, "ab") as output:
        worker = subprocess.Popen([sys.executable, "-m", "faust", "-A", "sinks", "worker", "-l", "info"],
                                  cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: "Worker ready" in log.read_text(), timeout=180, what="the worker to be ready")
    producer = Producer(producer_config(kafka))
    producer.produce(requests_topic, key=b"r", value=b"hello")
    producer.flush(30)
    return worker, answers_topic, str(log)


def test_a_sink_topic_the_cluster_lacks_is_created_with_the_apps_partitions(kafka, tmp_path):
    worker, answers_topic, _ = run_app(kafka, tmp_path, allow_declare=True)
    try:
        wait_for(lambda: partition_counts(admin(kafka), [answers_topic]) == {answers_topic: 2}, timeout=60,
                 what="the app to create its sink topic")
    finally:
        worker.kill()
        worker.wait(30)


def test_an_app_that_may_not_create_topics_stops_naming_the_missing_one(kafka, tmp_path):
    worker, answers_topic, log = run_app(kafka, tmp_path, allow_declare=False)
    try:
        worker.wait(120)
    finally:
        worker.kill()
    text = open(log).read()
    assert worker.returncode != 0
    line = f"records are sent to topic {answers_topic!r}, but it does not exist, and this app may not create topics"
    assert line in text
    assert "create it with 2 partitions" in text
    assert partition_counts(admin(kafka), [answers_topic]) == {}
