"""Security settings come from the environment, fill in the local broker's files, and never show the password."""
from pathlib import Path

import pytest

from config import ConfigError, load


def write(tmp_path: Path, name: str, text: str = "x") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_plaintext_by_default_adds_nothing_to_a_client():
    s = load({})
    assert s.security.protocol == "PLAINTEXT"
    assert s.kafka_client() == {"bootstrap.servers": "localhost:9092"}


def test_a_secured_protocol_on_the_local_broker_uses_its_listener_and_its_files():
    s = load({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "BROKER_HOME": "/srv/kafka"})
    assert s.bootstrap_servers == "localhost:9094" and s.broker_secured
    assert s.security.ca_file == Path("/srv/kafka/security/ca.pem")
    assert (s.security.sasl_mechanism, s.security.username) == ("SCRAM-SHA-512", "faust-eos")
    assert s.security.password.file == Path("/srv/kafka/security/faust-eos.password")
    mutual = load({"KAFKA_SECURITY_PROTOCOL": "ssl", "BROKER_HOME": "/srv/kafka"})
    assert mutual.bootstrap_servers == "localhost:9095"
    assert mutual.security.cert_file == Path("/srv/kafka/security/client.pem")


def test_an_external_sasl_ssl_cluster_is_spelled_for_librdkafka(tmp_path):
    ca = write(tmp_path, "ca.pem")
    s = load({"KAFKA_BOOTSTRAP_SERVERS": "kafka:9093", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
              "KAFKA_SSL_CA_FILE": ca, "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "team",
              "KAFKA_SASL_PASSWORD": "hunter2"})
    assert s.kafka_client(**{"group.id": "g"}) == {
        "bootstrap.servers": "kafka:9093", "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
        "ssl.endpoint.identification.algorithm": "https", "sasl.mechanism": "PLAIN",
        "sasl.username": "team", "sasl.password": "hunter2", "group.id": "g"}
    assert not s.broker_secured


def test_the_password_is_read_from_its_file_when_used(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("first\n")
    s = load({"KAFKA_BOOTSTRAP_SERVERS": "kafka:9093", "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
              "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "KAFKA_SASL_USERNAME": "team",
              "KAFKA_SASL_PASSWORD_FILE": str(secret)})
    secret.write_text("rotated\n")
    assert s.kafka_client()["sasl.password"] == "rotated"


def test_the_password_never_shows_in_the_settings_or_in_a_message():
    s = load({"KAFKA_BOOTSTRAP_SERVERS": "kafka:9093", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
              "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "team", "KAFKA_SASL_PASSWORD": "hunter2"})
    for shown in (repr(s), str(s), repr(s.security), f"{s.security.password}", str(s.security.password)):
        assert "hunter2" not in shown
    assert "***" in repr(s.security)


def test_hostname_verification_is_on_unless_switched_off(tmp_path):
    env = {"KAFKA_BOOTSTRAP_SERVERS": "kafka:9093", "KAFKA_SECURITY_PROTOCOL": "SSL"}
    assert load(env).kafka_client()["ssl.endpoint.identification.algorithm"] == "https"
    off = load({**env, "KAFKA_SSL_CHECK_HOSTNAME": "false"})
    assert off.kafka_client()["ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize("env, message", [
    ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL='TLS' is not valid"),
    ({"KAFKA_SASL_USERNAME": "team"}, "KAFKA_SASL_USERNAME is set but KAFKA_SECURITY_PROTOCOL=PLAINTEXT"),
    ({"KAFKA_SSL_CA_FILE": "/etc/ca.pem"}, "KAFKA_SSL_CA_FILE is set but KAFKA_SECURITY_PROTOCOL=PLAINTEXT"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "k:1", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "needs KAFKA_SASL_MECHANISM"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "k:1", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "GSSAPI"},
     "KAFKA_SASL_MECHANISM='GSSAPI' is not valid"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "k:1", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN"},
     "needs KAFKA_SASL_USERNAME"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "k:1", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN",
      "KAFKA_SASL_USERNAME": "u"}, "needs KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE"),
    ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CA_FILE": "/no/such/ca.pem"},
     "KAFKA_SSL_CA_FILE='/no/such/ca.pem' is not valid: no such file"),
    ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CHECK_HOSTNAME": "maybe"}, "KAFKA_SSL_CHECK_HOSTNAME='maybe'"),
    ({"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "not offered by the local broker"),
])
def test_bad_security_settings_are_one_line_naming_the_variable(env, message):
    with pytest.raises(ConfigError) as raised:
        load(env)
    line = str(raised.value)
    assert message in line and line.startswith("KAFKA_") and "\n" not in line


def test_a_certificate_needs_its_key_and_both_passwords_are_refused(tmp_path):
    env = {"KAFKA_BOOTSTRAP_SERVERS": "k:1", "KAFKA_SECURITY_PROTOCOL": "SSL",
           "KAFKA_SSL_CERT_FILE": write(tmp_path, "client.pem")}
    with pytest.raises(ConfigError, match="KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE go together"):
        load(env)
    sasl = {"KAFKA_BOOTSTRAP_SERVERS": "k:1", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN",
            "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p",
            "KAFKA_SASL_PASSWORD_FILE": write(tmp_path, "password")}
    with pytest.raises(ConfigError, match="both set: keep one"):
        load(sasl)
