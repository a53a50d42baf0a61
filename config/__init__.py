"""Every setting of faust-eos, read from the environment in one place.

Nothing else in the project reads ``os.environ``: import :data:`settings`
(or call :func:`load`) instead. Each setting has a default that works on a
laptop with the project's own local broker; a bad value raises
:class:`ConfigError` with one line naming the variable and the fix; importing
:data:`settings` with a bad environment exits with that line (status 1).
Checks that need the cluster run when a worker starts (:mod:`app.preflight`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from config.security import KafkaSecurity, LocalBrokerFiles, SecurityError, parse_flag, read_security

REPO_ROOT = Path(__file__).resolve().parent.parent

GUARANTEES = ("exactly_once", "at_least_once")
PROFILES = ("local", "production")

T = TypeVar("T")


class ConfigError(ValueError):
    """A setting has a value faust-eos cannot run with."""


@dataclass(frozen=True)
class Settings:
    """All settings; field docs name the environment variable."""

    # --- Kafka ---------------------------------------------------------
    bootstrap_servers: str  # KAFKA_BOOTSTRAP_SERVERS (default: local broker)
    use_local_broker: bool  # True unless KAFKA_BOOTSTRAP_SERVERS is set
    kafka_version: str  # KAFKA_VERSION: broker release fetched from Maven
    broker_port: int  # BROKER_PORT: client port of the local broker
    broker_controller_port: int  # BROKER_CONTROLLER_PORT: KRaft controller port
    broker_heap: str  # BROKER_HEAP: JVM heap of the local broker, e.g. 1G
    broker_home: Path  # BROKER_HOME: jars, data and log of the local broker
    broker_start_timeout_s: float  # BROKER_START_TIMEOUT_S
    broker_secured: bool  # BROKER_SECURED: the local broker also listens with SASL_SSL (SCRAM) and mutual TLS
    broker_sasl_ssl_port: int  # BROKER_SASL_SSL_PORT: its SASL_SSL port (default: BROKER_PORT + 2)
    broker_ssl_port: int  # BROKER_SSL_PORT: its mutual-TLS port (default: BROKER_PORT + 3)
    security: KafkaSecurity  # KAFKA_SECURITY_PROTOCOL, KAFKA_SSL_*, KAFKA_SASL_* (config.security)

    # --- pipeline ------------------------------------------------------
    app_id: str  # APP_ID: Faust app id = consumer group and id prefix
    profile: str  # PROFILE: local | production (production checks the cluster's durability at worker start)
    processing_guarantee: str  # PROCESSING_GUARANTEE: exactly_once | at_least_once
    commit_interval_ms: int  # COMMIT_INTERVAL_MS: how often offsets/transactions commit
    transaction_timeout_ms: int  # TRANSACTION_TIMEOUT_MS
    max_uncommitted_records: int  # MAX_UNCOMMITTED_RECORDS: records waiting for their commit at which input pauses
    partitions: int  # PARTITIONS: of payments, the repartition topic and tables
    dedup_retention_days: float  # DEDUP_RETENTION_DAYS: how long event_ids are remembered
    window_seconds: int  # WINDOW_SECONDS: tumbling window size
    #: WINDOW_GRACE_SECONDS: how long, in stream time, a window stays open past its end (default: one window)
    window_grace_seconds: float
    max_amount_cents: int  # MAX_AMOUNT_CENTS: larger amounts are rejected
    max_event_bytes: int  # MAX_EVENT_BYTES: larger records are rejected
    data_dir: Path  # DATA_DIR: worker state (RocksDB); one per worker process
    web_port: int  # WEB_PORT: the worker's HTTP port; one per worker process
    web_bind: str  # WEB_BIND: the address it listens on (default localhost; 0.0.0.0 for every interface)
    web_host: str  # WEB_HOST: the host name other workers reach it by (forwarded merchant queries)
    session_timeout_s: float  # SESSION_TIMEOUT_S: a silent worker leaves the group after this
    standby_replicas: int  # STANDBY_REPLICAS: standby copies of each table partition on other workers
    table_write_buffer_mb: float  # TABLE_WRITE_BUFFER_MB: RocksDB memtable per table partition

    topic_prefix: str  # TOPIC_PREFIX: put before every topic name, e.g. "staging-"

    @property
    def local_broker_files(self) -> LocalBrokerFiles:
        """Where the local broker keeps its CA, client certificate and SCRAM passwords."""
        return LocalBrokerFiles(self.broker_home / "security")

    def kafka_client(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings every client starts from: the bootstrap servers and the security settings."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.security.librdkafka(), **extra}

    @property
    def input_topic(self) -> str:
        return f"{self.topic_prefix}payments"

    @property
    def by_merchant_topic(self) -> str:
        return f"{self.topic_prefix}payments-by-merchant"

    @property
    def totals_topic(self) -> str:
        return f"{self.topic_prefix}merchant-totals"

    @property
    def windows_topic(self) -> str:
        return f"{self.topic_prefix}merchant-windows"

    @property
    def dlq_topic(self) -> str:
        return f"{self.topic_prefix}payments-dlq"

    @property
    def replication_factor(self) -> int:
        """Replicas of every topic the pipeline creates (its own topics, changelogs, repartitioning)."""
        return 1

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == "exactly_once"

    @property
    def output_topics(self) -> tuple[str, ...]:
        return (self.by_merchant_topic, self.totals_topic, self.windows_topic, self.dlq_topic)


def _read(env: Mapping[str, str], name: str, default: T, parse: Callable[[str], T], hint: str) -> T:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={raw!r} is not valid: {hint}") from None


def _default_transaction_timeout_ms(commit_interval_ms: int) -> int:
    """The layer's own default (``faust_eos.options.default_transaction_timeout_ms``): 10 s, or three
    commit intervals if longer."""
    return max(10_000, 3 * commit_interval_ms)


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(raw)
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not 0 < value < float("inf"):
        raise ValueError(raw)
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if not 0 <= value < float("inf"):
        raise ValueError(raw)
    return value


def _guarantee(raw: str) -> str:
    if raw not in GUARANTEES:
        raise ValueError(raw)
    return raw


def _profile(raw: str) -> str:
    if raw not in PROFILES:
        raise ValueError(raw)
    return raw


def child_env(**overrides: str) -> dict[str, str]:
    """This process's environment plus ``overrides``: for starting workers and tools."""
    return {**os.environ, **overrides}


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Build :class:`Settings` from ``env`` (default: the process environment)."""
    env = os.environ if env is None else env
    port = _read(env, "BROKER_PORT", 9092, _positive_int, "a TCP port number, e.g. 9092")
    external = env.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    broker_home = _read(env, "BROKER_HOME", REPO_ROOT / ".kafka", lambda s: Path(s).resolve(), "a directory")
    try:
        security = read_security(env, None if external else LocalBrokerFiles(broker_home / "security"))
    except SecurityError as exc:
        raise ConfigError(str(exc)) from None
    sasl_ssl_port = _read(env, "BROKER_SASL_SSL_PORT", port + 2, _positive_int, "a TCP port number")
    ssl_port = _read(env, "BROKER_SSL_PORT", port + 3, _positive_int, "a TCP port number")
    local_ports = {"PLAINTEXT": port, "SASL_SSL": sasl_ssl_port, "SSL": ssl_port}
    if not external and security.protocol not in local_ports:
        raise ConfigError(f"KAFKA_SECURITY_PROTOCOL={security.protocol} is not offered by the local broker: "
                          "use SASL_SSL or SSL (with BROKER_SECURED=true), or set KAFKA_BOOTSTRAP_SERVERS")
    window_seconds = _read(env, "WINDOW_SECONDS", 60, _positive_int, "seconds, e.g. 60")
    commit_interval_ms = _read(env, "COMMIT_INTERVAL_MS", 100, _positive_int, "milliseconds, e.g. 100")
    settings = Settings(
        bootstrap_servers=external or f"localhost:{local_ports[security.protocol]}",
        use_local_broker=not external,
        kafka_version=_read(env, "KAFKA_VERSION", "4.1.2", str, "a Kafka release such as 4.1.2, 4.4.0 or 3.9.1"),
        broker_port=port,
        broker_controller_port=_read(env, "BROKER_CONTROLLER_PORT", port + 1, _positive_int, "a TCP port number"),
        broker_heap=_read(env, "BROKER_HEAP", "1G", str, "a JVM heap size such as 1G or 768M"),
        broker_home=broker_home,
        broker_start_timeout_s=_read(env, "BROKER_START_TIMEOUT_S", 90.0, _positive_float, "seconds, e.g. 90"),
        broker_secured=_read(env, "BROKER_SECURED", security.protocol != "PLAINTEXT" and not external,
                             parse_flag, "use true or false"),
        broker_sasl_ssl_port=sasl_ssl_port,
        broker_ssl_port=ssl_port,
        security=security,
        app_id=_read(env, "APP_ID", "faust-eos", str, "a Kafka consumer group id"),
        profile=_read(env, "PROFILE", "local", _profile, "use local or production"),
        processing_guarantee=_read(
            env, "PROCESSING_GUARANTEE", "exactly_once", _guarantee, "use exactly_once or at_least_once"
        ),
        commit_interval_ms=commit_interval_ms,
        transaction_timeout_ms=_read(env, "TRANSACTION_TIMEOUT_MS", _default_transaction_timeout_ms(commit_interval_ms),
                                     _positive_int, "milliseconds, e.g. 10000"),
        max_uncommitted_records=_read(env, "MAX_UNCOMMITTED_RECORDS", 20_000, _positive_int,
                                      "a count of records, e.g. 20000"),
        partitions=_read(env, "PARTITIONS", 6, _positive_int, "a partition count, e.g. 6"),
        dedup_retention_days=_read(env, "DEDUP_RETENTION_DAYS", 7.0, _positive_float, "days, e.g. 7"),
        window_seconds=window_seconds,
        window_grace_seconds=_read(env, "WINDOW_GRACE_SECONDS", float(window_seconds), _non_negative_float,
                                   "seconds, 0 or more, e.g. 6"),
        max_amount_cents=_read(env, "MAX_AMOUNT_CENTS", 100_000_000, _positive_int, "cents, e.g. 100000000"),
        max_event_bytes=_read(env, "MAX_EVENT_BYTES", 4096, _positive_int, "bytes, e.g. 4096"),
        data_dir=_read(env, "DATA_DIR", REPO_ROOT / ".data" / "worker", lambda s: Path(s).resolve(), "a directory"),
        web_port=_read(env, "WEB_PORT", 6066, _positive_int, "a TCP port number, e.g. 6066"),
        web_bind=_read(env, "WEB_BIND", "localhost", str, "an address to listen on, e.g. localhost or 0.0.0.0"),
        web_host=_read(env, "WEB_HOST", "localhost", str, "a host name, e.g. worker-1.internal"),
        topic_prefix=_read(env, "TOPIC_PREFIX", "", str, "a topic name prefix"),
        session_timeout_s=_read(env, "SESSION_TIMEOUT_S", 10.0, _positive_float, "seconds, e.g. 10"),
        standby_replicas=_read(env, "STANDBY_REPLICAS", 0, _non_negative_int, "a replica count, 0 or more, e.g. 1"),
        table_write_buffer_mb=_read(env, "TABLE_WRITE_BUFFER_MB", 64.0, _positive_float, "MiB, e.g. 64 or 0.5"),
    )
    if settings.use_local_broker and settings.security.protocol != "PLAINTEXT" and not settings.broker_secured:
        raise ConfigError(f"KAFKA_SECURITY_PROTOCOL={settings.security.protocol} needs the local broker's secured "
                          "listeners, which BROKER_SECURED=false turns off: unset BROKER_SECURED")
    if settings.commit_interval_ms * 3 > settings.transaction_timeout_ms:
        raise ConfigError(
            f"COMMIT_INTERVAL_MS={settings.commit_interval_ms} is too close to "
            f"TRANSACTION_TIMEOUT_MS={settings.transaction_timeout_ms}: keep the commit interval "
            "at most a third of the transaction timeout"
        )
    return settings


try:
    settings = load()
except ConfigError as exc:  # one line, not a traceback, for whatever imports the settings
    raise SystemExit(f"error: {exc}") from None
