"""The pipeline on the local broker's secured listeners: SASL_SSL with SCRAM, and mutual TLS.

Those listeners are the only way in for these runs (their bootstrap address is
the secured port), so every client the pipeline and its commands open must
carry the security settings, or the run fails. Bad security input stops a
worker at start with one ``error:`` line.
"""
from __future__ import annotations

import datetime
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from worker_metrics import scrape, series

import config
from app.loadgen import LoadSpec
from tools.broker_security import issue, make_ca
from tools.workers import free_port, wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
START_S = 90  # a worker refused at start exits long before this; it bounds a retry loop
ROOT = Path(config.__file__).resolve().parent.parent


def faust(env: dict[str, str], *args: str, timeout: float = START_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faust", "-A", "app", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def secrets_of(settings: config.Settings) -> list[str]:
    return [settings.security.password.reveal()] if settings.security.password else []


def test_the_pipeline_is_exact_over_sasl_ssl_with_scram_and_shows_no_secret(pipeline):
    run = pipeline("exactly_once", KAFKA_SECURITY_PROTOCOL="SASL_SSL")
    assert run.settings.bootstrap_servers == f"localhost:{run.settings.broker_sasl_ssl_port}"
    load = run.produce(LoadSpec(count=3_000, seed=31, duplicate_rate=0.05, bad_rate=0.02))
    worker = run.add_worker()

    report = run.reconcile(wait_s=DRAIN_S)

    assert report["ok"], report["problems"]
    assert report["counted_events"] == load.by_kind["valid"]
    wait_for(lambda: series(scrape(worker), "faust_eos_lso_lag_records"), timeout=DRAIN_S,
             what="LSO lag read over SASL_SSL")
    listed = faust(run.env, "transactions")
    assert listed.returncode == 0, listed.stderr
    stable = faust(run.env, "lso", run.settings.totals_topic)
    assert stable.returncode == 0, stable.stderr
    shown = [worker.get("/metrics")[1].decode(), str(report), listed.stdout + listed.stderr,
             stable.stdout + stable.stderr]
    assert run.stop_all() == {"worker-0": 0}
    shown.append(worker.log_text())
    for password in secrets_of(run.settings):
        assert not [text for text in shown if password in text]


def test_the_pipeline_is_exact_over_mutual_tls(pipeline):
    run = pipeline("exactly_once", KAFKA_SECURITY_PROTOCOL="SSL")
    assert run.settings.security.cert_file is not None
    load = run.produce(LoadSpec(count=2_000, seed=32, duplicate_rate=0.05))
    run.add_worker()

    report = run.reconcile(wait_s=DRAIN_S)

    assert report["ok"], report["problems"]
    assert report["counted_events"] == load.by_kind["valid"]
    assert run.stop_all() == {"worker-0": 0}


# --- bad security input: one line at start ----------------------------------------


@pytest.fixture(scope="module")
def strangers(tmp_path_factory) -> Path:
    """A CA the broker does not know, and an expired client certificate from the broker's own CA."""
    directory = tmp_path_factory.mktemp("strangers")
    make_ca(directory, "other-ca", "a CA the broker does not know")
    long_ago = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    issue(directory, "expired", config.security.LOCAL_USER, config.load().local_broker_files.ca_file,
          not_before=long_ago, not_after=long_ago + datetime.timedelta(days=30))
    issue(directory, "expired-broker", "localhost", directory / "other-ca.pem", hostnames=("localhost",),
          not_before=long_ago, not_after=long_ago + datetime.timedelta(days=30))
    return directory


def external(settings: config.Settings, port: int, host: str = "localhost", **env: str) -> dict[str, str]:
    """Settings for the local broker spelled out as for any cluster (no local defaults)."""
    files = settings.local_broker_files
    return {"KAFKA_BOOTSTRAP_SERVERS": f"{host}:{port}", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SSL_CA_FILE": str(files.ca_file), "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "KAFKA_SASL_USERNAME": config.security.LOCAL_USER,
            "KAFKA_SASL_PASSWORD_FILE": str(files.password_file(config.security.LOCAL_USER)), **env}


class ExpiredTlsListener:
    """A TLS endpoint whose certificate expired: what a client meets after a missed renewal."""

    def __init__(self, certificate: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certificate, key)
        self.sock = socket.create_server(("localhost", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                self.context.wrap_socket(client, server_side=True).close()
            except (OSError, ssl.SSLError):
                client.close()


@pytest.fixture(scope="module")
def expired_listener(strangers) -> ExpiredTlsListener:
    return ExpiredTlsListener(strangers / "expired-broker.pem", strangers / "expired-broker.key")


def bad_inputs(settings: config.Settings, strangers: Path, expired_port: int) -> dict[str, tuple[dict[str, str], str]]:
    sasl = settings.broker_sasl_ssl_port
    return {
        "wrong password": (
            {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_PASSWORD": "not-the-password"},
            "refused the SASL login of user 'faust-eos': Authentication failed"),
        "unknown CA": (
            external(settings, sasl, KAFKA_SSL_CA_FILE=str(strangers / "other-ca.pem")),
            f"the TLS certificate of Kafka at localhost:{sasl} was refused"),
        "hostname mismatch": (
            external(settings, sasl, host="127.0.0.1"),
            "certificate is not valid for '127.0.0.1'"),
        "plaintext client on a TLS listener": (
            {"KAFKA_BOOTSTRAP_SERVERS": f"localhost:{sasl}"},
            "answered in TLS: it is a TLS listener (set KAFKA_SECURITY_PROTOCOL to SSL or SASL_SSL)"),
        "expired client certificate": (
            {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CERT_FILE": str(strangers / "expired.pem"),
             "KAFKA_SSL_KEY_FILE": str(strangers / "expired.key")},
            "the broker refused the client certificate: it has expired"),
        "expired broker certificate": (
            external(settings, expired_port, KAFKA_SSL_CA_FILE=str(strangers / "other-ca.pem")),
            "certificate has expired"),
    }


CASES = ["wrong password", "unknown CA", "hostname mismatch", "plaintext client on a TLS listener",
         "expired client certificate", "expired broker certificate"]


@pytest.mark.parametrize("case", CASES)
def test_bad_security_input_stops_the_worker_at_start_with_one_line(kafka, strangers, expired_listener, tmp_path,
                                                                    case):
    env, expected = bad_inputs(kafka, strangers, expired_listener.port)[case]
    worker_env = config.child_env(APP_ID=f"bad-input-{free_port()}", DATA_DIR=str(tmp_path / "data"),
                                  WEB_PORT=str(free_port()), **env)
    started = faust(worker_env, "worker")

    errors = [line for line in started.stderr.splitlines() if line.startswith("error:")]
    assert started.returncode == 1, started.stdout[-2000:] + started.stderr[-2000:]
    assert len(errors) == 1 and expected in errors[0], started.stderr[-2000:]
    assert "Traceback" not in started.stdout + started.stderr
    assert "not-the-password" not in started.stdout + started.stderr


@pytest.mark.parametrize("command", [("produce", "--count", "10"), ("reconcile",), ("transactions",)],
                         ids=lambda command: command[0])
def test_commands_stop_with_the_same_one_line(kafka, command):
    env = config.child_env(APP_ID=f"bad-input-{free_port()}", KAFKA_SECURITY_PROTOCOL="SASL_SSL",
                           KAFKA_SASL_PASSWORD="not-the-password")

    ran = faust(env, *command)

    errors = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert ran.returncode == 1 and len(errors) == 1, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "refused the SASL login of user 'faust-eos'" in errors[0]
    assert "Traceback" not in ran.stdout + ran.stderr
