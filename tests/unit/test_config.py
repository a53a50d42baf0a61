"""Settings come from an environment mapping; bad values fail with the variable's name."""
import pytest

from config import ConfigError, load


def test_defaults_use_the_local_broker_with_exactly_once():
    s = load({})
    assert s.use_local_broker is True
    assert s.bootstrap_servers == "localhost:9092"
    assert s.processing_guarantee == "exactly_once" and s.exactly_once
    assert (s.partitions, s.commit_interval_ms, s.transaction_timeout_ms) == (6, 100, 10_000)
    assert s.max_uncommitted_records == 20_000
    assert (s.max_event_bytes, s.max_amount_cents, s.window_seconds) == (4096, 100_000_000, 60)
    assert s.input_topic == "payments" and s.dlq_topic == "payments-dlq"
    assert s.profile == "local"


def test_empty_values_mean_the_default():
    assert load({"PARTITIONS": "", "PROCESSING_GUARANTEE": ""}) == load({})


def test_broker_port_moves_the_local_bootstrap_address_and_controller_port():
    s = load({"BROKER_PORT": "19092"})
    assert s.bootstrap_servers == "localhost:19092" and s.broker_controller_port == 19093


def test_external_bootstrap_servers_switch_off_the_local_broker():
    s = load({"KAFKA_BOOTSTRAP_SERVERS": "kafka1:9092,kafka2:9092"})
    assert s.use_local_broker is False
    assert s.bootstrap_servers == "kafka1:9092,kafka2:9092"


def test_topic_prefix_goes_before_every_topic():
    s = load({"TOPIC_PREFIX": "staging-"})
    assert s.input_topic == "staging-payments"
    assert all(t.startswith("staging-") for t in s.output_topics)


@pytest.mark.parametrize(
    "env, variable",
    [
        ({"PROCESSING_GUARANTEE": "maybe"}, "PROCESSING_GUARANTEE"),
        ({"PARTITIONS": "0"}, "PARTITIONS"),
        ({"PARTITIONS": "-3"}, "PARTITIONS"),
        ({"COMMIT_INTERVAL_MS": "abc"}, "COMMIT_INTERVAL_MS"),
        ({"DEDUP_RETENTION_DAYS": "0"}, "DEDUP_RETENTION_DAYS"),
        ({"BROKER_PORT": "port"}, "BROKER_PORT"),
        ({"PROFILE": "prod"}, "PROFILE"),
        ({"WINDOW_GRACE_SECONDS": "-1"}, "WINDOW_GRACE_SECONDS"),
        ({"WINDOW_GRACE_SECONDS": "inf"}, "WINDOW_GRACE_SECONDS"),
        ({"TABLE_WRITE_BUFFER_MB": "0"}, "TABLE_WRITE_BUFFER_MB"),
        ({"TABLE_WRITE_BUFFER_MB": "inf"}, "TABLE_WRITE_BUFFER_MB"),
    ],
    ids=repr,
)
def test_bad_value_raises_config_error_naming_the_variable(env, variable):
    with pytest.raises(ConfigError, match=variable):
        load(env)


def test_a_window_stays_open_one_window_length_past_its_end_unless_told_otherwise():
    assert load({"WINDOW_SECONDS": "30"}).window_grace_seconds == 30.0
    assert load({"WINDOW_SECONDS": "30", "WINDOW_GRACE_SECONDS": "0"}).window_grace_seconds == 0.0


def test_commit_interval_too_close_to_transaction_timeout_is_rejected():
    with pytest.raises(ConfigError, match="COMMIT_INTERVAL_MS=30000.*TRANSACTION_TIMEOUT_MS=60000"):
        load({"COMMIT_INTERVAL_MS": "30000", "TRANSACTION_TIMEOUT_MS": "60000"})


@pytest.mark.parametrize("interval_ms", [100, 1000, 3333, 3334, 30_000])
def test_the_transaction_timeout_defaults_to_the_layers_own_default_for_the_commit_interval(interval_ms):
    from faust_eos.options import default_transaction_timeout_ms

    expected = default_transaction_timeout_ms(interval_ms)
    assert load({"COMMIT_INTERVAL_MS": str(interval_ms)}).transaction_timeout_ms == expected
    assert expected == (10_000 if interval_ms <= 3333 else 3 * interval_ms)


def test_commit_interval_of_a_third_of_the_transaction_timeout_is_allowed():
    assert load({"COMMIT_INTERVAL_MS": "20000", "TRANSACTION_TIMEOUT_MS": "60000"}).commit_interval_ms == 20000
