"""The faust_eos wheel, installed into a fresh virtualenv, gives another team's Faust app exactly-once.

That app lives in a directory of its own with its own ``app.py`` and
``config.py`` (the names this repository's example pipeline uses too), counts
words per 2-second window in a windowed table that expires old windows, and
sends a heartbeat from a timer. It is SIGKILLed mid-stream and restarted, and
then every word counts exactly once in its window, the expired windows are
deleted in the committed changelog, and the timer's records are committed.
"""
from __future__ import annotations

import collections
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from app.kafka import admin, producer_config
from app.reconcile import read_committed
from config import REPO_ROOT
from tools.workers import free_port, wait_for

pytestmark = pytest.mark.broker

CONFIG_PY = '''
"""Settings of the word-window app (a module named like the example pipeline's own package)."""
APP_ID = "{app_id}"
BROKER = "eos://{bootstrap}?transaction_timeout_ms=30000"
WORDS_TOPIC = "{words}"
COUNTS_TOPIC = "{counts}"
HEARTBEATS_TOPIC = "{heartbeats}"
DATADIR = "{datadir}"
WEB_PORT = {web_port}
WINDOW_S = 2.0
EXPIRES_S = 30.0  # longer than a restart takes: no event reaches a window already expired
'''

APP_PY = '''
"""Word counts per tumbling window, exactly once, with a heartbeat timer."""
import itertools
from datetime import timedelta

import faust

import config

app = faust.App(
    config.APP_ID,
    broker=config.BROKER,
    processing_guarantee="exactly_once",
    store="eos-rocksdb://",
    datadir=config.DATADIR,
    topic_partitions=3,
    topic_replication_factor=1,
    broker_commit_interval=0.2,
    table_cleanup_interval=1.0,
    broker_session_timeout=6,
    broker_heartbeat_interval=1,
    web_port=config.WEB_PORT,
)
words = app.topic(config.WORDS_TOPIC, key_serializer="raw", value_serializer="json")
counts_out = app.topic(config.COUNTS_TOPIC, key_serializer="raw", value_serializer="json")
heartbeats = app.topic(config.HEARTBEATS_TOPIC, key_serializer="raw", value_serializer="json")
counts = (
    app.Table("window-counts", default=int, partitions=3)
    .tumbling(config.WINDOW_S, expires=timedelta(seconds=config.EXPIRES_S))
    .relative_to_stream()
)
beats = itertools.count(1)


@app.agent(words)
async def count(stream):
    async for event in stream.events():
        word = event.value["word"]
        counts[word] += 1
        window_start = (event.message.timestamp // config.WINDOW_S) * config.WINDOW_S
        await counts_out.send(
            key=word.encode(),
            value={"word": word, "window_start": window_start, "count": counts[word].current(),
                   "id": event.value["id"]},
        )


@app.timer(0.5)
async def heartbeat():
    await heartbeats.send(key=b"beat", value={"beat": next(beats)})
'''

WORDS = [f"w{i:02d}" for i in range(12)]
EVENTS = 3_000
RATE = 40.0  # the load spans 75 s: windows expire while it runs, after the crash


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A new virtualenv holding the faust_eos wheel and its dependencies, and nothing of this repository."""
    root = tmp_path_factory.mktemp("installed")
    source, dist = root / "source", root / "dist"
    # built from a copy of what the wheel is made of, so no build output lands in the repository
    shutil.copytree(REPO_ROOT / "faust_eos", source / "faust_eos", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(source)],
                   check=True, timeout=600)
    wheels = list(dist.glob("faust_eos-*.whl"))
    assert len(wheels) == 1, wheels
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheels[0])],
                   check=True, timeout=900)
    return python


def test_the_wheel_holds_the_library_alone(fresh_venv):
    probe = ("import importlib.util as u; "
             "print(','.join(m for m in ('faust_eos', 'app', 'agents', 'tables', 'config', 'tools', 'benchmarks', "
             "'kafka_ops') if u.find_spec(m)))")
    found = subprocess.run([str(fresh_venv), "-c", probe], cwd="/", capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "faust_eos"


def start(python: Path, app_dir: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([str(python), "-m", "faust", "-A", "app", "worker", "-l", "info"], cwd=app_dir,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def produce_words(kafka, topic: str) -> None:
    producer = Producer(producer_config(kafka))
    started = time.monotonic()
    for i in range(EVENTS):
        word = WORDS[(i * 5) % len(WORDS)]
        producer.produce(topic, key=word.encode(), value=json.dumps({"word": word, "id": i}).encode())
        producer.poll(0)
        time.sleep(max(0.0, started + i / RATE - time.monotonic()))
    producer.flush(30)


def committed_values(kafka, topic: str) -> list[dict]:
    return [json.loads(record.value) for record in read_committed(kafka, topic)]


def test_an_outside_app_counts_windows_exactly_once_across_a_crash(kafka, fresh_venv, tmp_path):
    suffix = uuid.uuid4().hex[:6]
    topics = {name: f"installed-{name}-{suffix}" for name in ("words", "counts", "heartbeats")}
    # the sinks are left to the app to create: the local broker does not create topics on use
    client = admin(kafka)
    for future in client.create_topics([NewTopic(topics["words"], num_partitions=3, replication_factor=1)]).values():
        future.result(30)
    app_id = f"installed-{suffix}"
    app_dir = tmp_path / "their-project"
    app_dir.mkdir()
    (app_dir / "config.py").write_text(CONFIG_PY.format(
        app_id=app_id, bootstrap=kafka.bootstrap_servers, datadir=tmp_path / "data", web_port=free_port(),
        **topics))
    (app_dir / "app.py").write_text(APP_PY)
    feeder = threading.Thread(target=produce_words, args=(kafka, topics["words"]), daemon=True)

    log = tmp_path / "worker.log"
    worker = start(fresh_venv, app_dir, log)
    try:
        wait_for(lambda: "Worker ready" in log.read_text(), timeout=180, what="the worker to be ready")
        feeder.start()
        wait_for(lambda: len(committed_values(kafka, topics["counts"])) >= 800, timeout=180, what="the first counts")
        assert feeder.is_alive(), "the load was over before the crash"
        beats_before_crash = len(committed_values(kafka, topics["heartbeats"]))
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        worker = start(fresh_venv, app_dir, log)
        wait_for(lambda: len(committed_values(kafka, topics["counts"])) >= EVENTS, timeout=300, what="every count")
        feeder.join(60)
        wait_for(lambda: len(committed_values(kafka, topics["heartbeats"])) > beats_before_crash + 4, timeout=60,
                 what="heartbeats from the restarted worker")
        updates = committed_values(kafka, topics["counts"])
        changelog = read_committed(kafka, f"{app_id}-window-counts-changelog")
    finally:
        worker.kill()
        worker.wait(30)

    text = log.read_text()
    assert "Claimed installed-" in text, "the app did not run on the eos:// transport"
    assert text.count("Worker ready") >= 2, "the worker did not start twice"
    assert sorted(update["id"] for update in updates) == list(range(EVENTS)), "an event counted twice, or never"
    by_window = collections.defaultdict(list)
    for update in updates:
        by_window[(update["word"], update["window_start"])].append(update["count"])
    broken = {window: seen for window, seen in by_window.items() if seen != list(range(1, len(seen) + 1))}
    assert broken == {}, repr(broken)[:3000]

    # each window that expired while the app ran is deleted in the committed changelog
    last_value = {}
    for record in changelog:
        last_value[record.key] = record.value
    deleted = [key for key, value in last_value.items() if value is None]
    assert deleted, "no window's expiry reached the changelog"
    assert len(deleted) < len(last_value), "the newest windows should still be there"
    assert beats_before_crash > 0, "the timer's records were not committed before the crash"
