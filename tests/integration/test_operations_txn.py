"""Transaction operations and fail-fast settings, on the real broker.

A stalled transaction is what an operator meets in production: a transactional
producer began, wrote, and stopped. The commands must list it, find it hanging,
abort it, and then a read_committed reader must get past it. Workers started
with a bad setting must stop with one line naming it.
"""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaException, Producer

import config
from config import REPO_ROOT
from tests.integration.transactions_support import (
    COMMAND_TIMEOUT_S,
    committed_after,
    create_topic,
    faust,
    faust_json,
    read_committed,
)
from tools.workers import free_port

pytestmark = pytest.mark.broker

def lso_row(topic: str, partition: int) -> dict:
    rows = {row["partition"]: row for row in faust_json("lso", topic)}
    return rows[f"{topic}-{partition}"]


def test_stalled_transaction_is_listed_found_hanging_and_aborted_by_id(kafka, stalled):
    listed = {row["transactional id"]: row for row in faust_json("transactions")}
    assert listed[stalled.transactional_id]["state"] == "Ongoing"
    assert listed[stalled.transactional_id]["partitions"] == f"{stalled.topic}-0"

    # Not yet past its own 600 s timeout: not hanging by default, hanging past a 0 s threshold.
    assert faust_json("hanging-transactions", "--topic", stalled.topic) == []
    [hanging] = faust_json("hanging-transactions", "--topic", stalled.topic, "--older-than", "0")
    assert hanging["transactional id"] == stalled.transactional_id
    assert (hanging["partition"], hanging["blocks LSO"], hanging["LSO lag"]) == (f"{stalled.topic}-0", "yes", "5")
    [blocking] = faust_json("hanging-transactions", "--topic", stalled.topic, "--blocking")
    assert blocking["transactional id"] == stalled.transactional_id

    committed_after(kafka, stalled.topic)
    before = lso_row(stalled.topic, 0)
    assert (before["LSO"], before["high watermark"], before["LSO lag"]) == ("0", "6", "6")
    assert before["held by"] != "-"

    declined = faust("abort-transaction", "--transactional-id", stalled.transactional_id, stdin="n\n")
    assert declined.returncode == 1 and "nothing aborted" in declined.stderr
    assert lso_row(stalled.topic, 0)["LSO"] == "0"

    aborted = faust("abort-transaction", "--transactional-id", stalled.transactional_id, "--yes")
    assert aborted.returncode == 0, aborted.stderr
    assert "its producer is fenced" in aborted.stdout

    after = lso_row(stalled.topic, 0)
    assert after["LSO"] == after["high watermark"] and after["LSO lag"] == "0"
    assert read_committed(kafka, stalled.topic, 0) == [b"committed"]
    assert stalled.transactional_id not in {row["transactional id"] for row in faust_json("transactions")}
    with pytest.raises(KafkaException):  # the stalled producer was fenced
        stalled.producer.commit_transaction(30)


def test_hanging_transaction_is_aborted_on_its_partition(kafka, stalled):
    committed_after(kafka, stalled.topic)
    assert read_committed(kafka, stalled.topic, 0) == []  # the open transaction holds the reader back

    aborted = faust("abort-transaction", "--topic", stalled.topic, "--partition", "0", "--yes")
    assert aborted.returncode == 0, aborted.stderr
    assert f"on {stalled.topic}-0 (transaction from offset 0)" in aborted.stdout

    after = lso_row(stalled.topic, 0)
    assert (after["LSO"], after["high watermark"], after["LSO lag"]) == ("7", "7", "0")  # 5 + 1 + the marker
    assert read_committed(kafka, stalled.topic, 0) == [b"committed"]
    assert faust_json("hanging-transactions", "--topic", stalled.topic, "--older-than", "0") == []


def test_abort_of_an_unknown_transactional_id_says_so(kafka):
    result = faust("abort-transaction", "--transactional-id", f"never-{uuid.uuid4().hex}", "--yes")
    assert result.returncode == 1
    assert result.stderr.strip().endswith("is unknown to its coordinator")
    assert "Traceback" not in result.stderr


def test_lso_of_a_topic_without_transactions_equals_the_high_watermark(kafka):
    topic = f"t-lso-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, 3)
    committed_after(kafka, topic)
    rows = faust_json("lso", topic)
    assert [(r["partition"], r["high watermark"], r["LSO"], r["LSO lag"], r["held by"]) for r in rows] == [
        (f"{topic}-0", "1", "1", "0", "-"), (f"{topic}-1", "0", "0", "0", "-"), (f"{topic}-2", "0", "0", "0", "-")]


@pytest.mark.parametrize("command", [["transactions"], ["lso", "payments"], ["hanging-transactions"]])
def test_commands_fail_with_one_line_when_the_broker_is_unreachable(kafka, command):
    result = faust(*command, env=config.child_env(KAFKA_BOOTSTRAP_SERVERS=f"localhost:{free_port()}"))
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot reach Kafka at localhost:")


# --- fail-fast settings ---------------------------------------------------------------


def start_worker(tmp_path, **env: str) -> subprocess.CompletedProcess:
    """Start ``faust -A app worker`` on isolated topics; it is expected to stop by itself."""
    name = uuid.uuid4().hex[:8]
    base = dict(TOPIC_PREFIX=f"ff-{name}-", APP_ID=f"faust-eos-ff-{name}", DATA_DIR=str(tmp_path / "worker"),
                WEB_PORT=str(free_port()))
    return subprocess.run(
        [sys.executable, "-m", "faust", "-A", "app", "worker", "-l", "info"],
        cwd=REPO_ROOT, env=config.child_env(**{**base, **env}), capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def assert_stops_with(result: subprocess.CompletedProcess, line: str) -> None:
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [line], result.stderr


def test_transaction_timeout_above_the_broker_maximum_stops_the_worker(kafka, tmp_path):
    result = start_worker(tmp_path, TRANSACTION_TIMEOUT_MS="900001")
    assert_stops_with(result, "error: TRANSACTION_TIMEOUT_MS=900001 is above the brokers' "
                              "transaction.max.timeout.ms=900000: set TRANSACTION_TIMEOUT_MS to at most 900000 "
                              "(or raise transaction.max.timeout.ms on the brokers)")


def test_commit_interval_close_to_the_transaction_timeout_stops_the_worker(kafka, tmp_path):
    result = start_worker(tmp_path, COMMIT_INTERVAL_MS="25000", TRANSACTION_TIMEOUT_MS="60000")
    assert_stops_with(result, "error: COMMIT_INTERVAL_MS=25000 is too close to TRANSACTION_TIMEOUT_MS=60000: "
                              "keep the commit interval at most a third of the transaction timeout")


def test_unknown_processing_guarantee_stops_the_worker(kafka, tmp_path):
    result = start_worker(tmp_path, PROCESSING_GUARANTEE="exactly_twice")
    assert_stops_with(result, "error: PROCESSING_GUARANTEE='exactly_twice' is not valid: "
                              "use exactly_once or at_least_once")


def test_input_topic_with_other_partition_count_stops_the_worker(kafka, tmp_path):
    prefix = f"ff-{uuid.uuid4().hex[:8]}-"
    create_topic(kafka, f"{prefix}payments", 3)
    result = start_worker(tmp_path, TOPIC_PREFIX=prefix, PARTITIONS="4")
    assert_stops_with(result, f"error: topic '{prefix}payments' has 3 partitions but PARTITIONS=4: set PARTITIONS=3, "
                              "or delete the pipeline's topics so they are created with 4")


def test_changelog_topic_with_other_partition_count_stops_the_worker(kafka, tmp_path):
    app_id = f"faust-eos-ff-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, f"{app_id}-merchant-totals-changelog", 2)
    result = start_worker(tmp_path, APP_ID=app_id, PARTITIONS="4")
    assert_stops_with(result, f"error: topic '{app_id}-merchant-totals-changelog' has 2 partitions but PARTITIONS=4: "
                              "set PARTITIONS=2, or delete the pipeline's topics so they are created with 4")


def test_production_profile_on_a_single_replica_transaction_log_stops_the_worker(kafka, tmp_path):
    if not kafka.use_local_broker:
        pytest.skip("asserts the local one-node broker's transaction log settings")
    Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"ff-{uuid.uuid4().hex}"}
             ).init_transactions(60)  # makes sure __transaction_state exists
    result = start_worker(tmp_path, PROFILE="production")
    assert_stops_with(
        result,
        "error: PROFILE=production needs a transaction state log that survives a broker loss: "
        "the brokers' transaction.state.log.replication.factor is 1 (needs 3), "
        "the brokers' transaction.state.log.min.isr is 1 (needs 2), "
        "the replication factor of __transaction_state is 1 (needs 3), "
        "min.insync.replicas of __transaction_state is 1 (needs 2): "
        "fix the cluster, or use PROFILE=local on a test cluster",
    )


def test_unreachable_cluster_stops_the_worker(kafka, tmp_path):
    port = free_port()
    result = start_worker(tmp_path, KAFKA_BOOTSTRAP_SERVERS=f"localhost:{port}")
    assert_stops_with(result, f"error: cannot check the settings against the cluster: cannot reach Kafka at "
                              f"localhost:{port}: Connection refused (is the broker running? "
                              "see KAFKA_BOOTSTRAP_SERVERS)")


def test_unknown_profile_stops_the_worker(kafka, tmp_path):
    result = start_worker(tmp_path, PROFILE="prod")
    assert_stops_with(result, "error: PROFILE='prod' is not valid: use local or production")
