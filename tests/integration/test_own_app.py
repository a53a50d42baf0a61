"""Another team's Faust app gets exactly-once from one line: ``broker="eos://..."``.

The app below knows nothing of this project's pipeline or settings. It is
killed (SIGKILL) while it counts, restarted on the same data directory, and
its output must still count every word exactly once.
"""
from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from app.kafka import admin, producer_config
from app.reconcile import read_committed
from tools.workers import free_port, wait_for

WORD_COUNT_APP = '''
import faust

app = faust.App(
    "{app_id}",
    broker="eos://{bootstrap}?transaction_timeout_ms=30000",
    processing_guarantee="exactly_once",
    store="eos-rocksdb://",
    datadir="{datadir}",
    topic_partitions=3,
    topic_replication_factor=1,
    broker_commit_interval=0.2,
    web_port={web_port},
)
words = app.topic("{words}", key_serializer="raw", value_serializer="raw")
counts_out = app.topic("{counts}", key_serializer="raw", value_serializer="json")
counts = app.Table("counts", default=int, partitions=3)


@app.agent(words)
async def count(stream):
    async for word in stream:
        word = word.decode()
        counts[word] += 1
        await counts_out.send(key=word.encode(), value={{"word": word, "count": counts[word]}})
'''

WORDS = [f"word{i:02d}" for i in range(20)]
EVENTS = 3_000


def start(app_dir: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "faust", "-A", "wordcount", "worker", "-l", "info"],
            cwd=app_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def produce_words(kafka, topic: str, rate: float = 150.0) -> None:
    producer = Producer(producer_config(kafka))
    started = time.monotonic()
    for i in range(EVENTS):
        word = WORDS[(i * 7) % len(WORDS)]
        producer.produce(topic, key=word.encode(), value=word.encode())
        producer.poll(0)
        time.sleep(max(0.0, started + i / rate - time.monotonic()))
    producer.flush(30)


def counts_seen(kafka, topic: str) -> list[dict]:
    """Every committed count update, as a read_committed reader sees them."""
    return [json.loads(record.value) for record in read_committed(kafka, topic)]


def test_another_faust_app_counts_exactly_once_across_a_crash(kafka, tmp_path):
    suffix = uuid.uuid4().hex[:6]
    words_topic, counts_topic = f"own-app-words-{suffix}", f"own-app-counts-{suffix}"
    client = admin(kafka)
    futures = client.create_topics([NewTopic(t, num_partitions=3, replication_factor=1) for t in (words_topic, counts_topic)])
    for future in futures.values():
        future.result(30)
    (tmp_path / "wordcount.py").write_text(
        WORD_COUNT_APP.format(
            app_id=f"own-app-{suffix}",
            bootstrap=kafka.bootstrap_servers,
            datadir=tmp_path / "data",
            web_port=free_port(),
            words=words_topic,
            counts=counts_topic,
        )
    )
    expected = collections.Counter(WORDS[(i * 7) % len(WORDS)] for i in range(EVENTS))
    feeder = threading.Thread(target=produce_words, args=(kafka, words_topic), daemon=True)

    log = tmp_path / "worker.log"
    worker = start(tmp_path, log)
    try:
        wait_for(lambda: "Worker ready" in log.read_text(), timeout=180, what="the worker to be ready")
        feeder.start()  # words keep coming while the worker is killed and restarted
        wait_for(lambda: len(counts_seen(kafka, counts_topic)) >= 500, timeout=180, what="the first counts")
        assert feeder.is_alive(), "the load was over before the crash"
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        worker = start(tmp_path, log)
        wait_for(lambda: len(counts_seen(kafka, counts_topic)) >= EVENTS, timeout=240, what="every count")
        updates = counts_seen(kafka, counts_topic)
    finally:
        worker.kill()
        worker.wait(30)
        feeder.join(60)

    by_word = collections.defaultdict(list)
    for update in updates:
        by_word[update["word"]].append(update["count"])
    assert {word: counts for word, counts in by_word.items() if counts != list(range(1, len(counts) + 1))} == {}
    assert {word: len(counts) for word, counts in by_word.items()} == dict(expected)
    text = log.read_text()
    assert "Claimed own-app-" in text, "the app did not run on the eos:// transport"
    assert text.count("Worker ready") >= 2, "the worker did not start twice"
