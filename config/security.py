"""How every Kafka client of the project authenticates and encrypts: one set of settings.

:func:`read_security` builds a :class:`KafkaSecurity` from the environment
(called by :func:`config.load`); :meth:`KafkaSecurity.librdkafka` spells it as
librdkafka (confluent-kafka) settings, which every client of the project takes,
and :func:`faust_eos.credentials` turns those into Faust's (aiokafka's).

The password is a :class:`Secret`: printing the settings, or formatting them
into a message, shows ``***``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: the SCRAM user the local broker creates for the pipeline (tools.broker)
LOCAL_USER = "faust-eos"


class SecurityError(ValueError):
    """A security setting faust-eos cannot run with; one line naming the variable."""


class Secret:
    """A password, from a variable or read from a file when used; never shown."""

    def __init__(self, value: str | None = None, file: Path | None = None) -> None:
        self._value = value
        self.file = file

    def reveal(self) -> str:
        if self._value is not None:
            return self._value
        assert self.file is not None
        try:
            return self.file.read_text().strip()
        except OSError as exc:
            raise SecurityError(f"cannot read the SASL password file {self.file}: {exc.strerror or exc}") from None

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and (self._value, self.file) == (other._value, other.file)

    def __hash__(self) -> int:
        return hash((self._value, self.file))


@dataclass(frozen=True)
class KafkaSecurity:
    """Security protocol, TLS files and SASL credentials of every Kafka client."""

    protocol: str = "PLAINTEXT"  # KAFKA_SECURITY_PROTOCOL: PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ca_file: Path | None = None  # KAFKA_SSL_CA_FILE: CA certificates (PEM); default: the system's
    cert_file: Path | None = None  # KAFKA_SSL_CERT_FILE: client certificate (PEM), for mutual TLS
    key_file: Path | None = None  # KAFKA_SSL_KEY_FILE: its private key (PEM, unencrypted)
    check_hostname: bool = True  # KAFKA_SSL_CHECK_HOSTNAME: the broker's certificate must name its host
    sasl_mechanism: str | None = None  # KAFKA_SASL_MECHANISM: PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    username: str | None = None  # KAFKA_SASL_USERNAME
    password: Secret | None = None  # KAFKA_SASL_PASSWORD, or KAFKA_SASL_PASSWORD_FILE

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def librdkafka(self) -> dict[str, str]:
        """These settings as librdkafka spells them (empty for PLAINTEXT); holds the password."""
        spelled = {"security.protocol": self.protocol} if self.protocol != "PLAINTEXT" else {}
        if self.uses_tls:
            spelled["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else "none"
            for key, path in (("ssl.ca.location", self.ca_file), ("ssl.certificate.location", self.cert_file),
                              ("ssl.key.location", self.key_file)):
                if path is not None:
                    spelled[key] = str(path)
        if self.uses_sasl:
            assert self.sasl_mechanism and self.username and self.password
            spelled.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                            "sasl.password": self.password.reveal()})
        return spelled


@dataclass(frozen=True)
class LocalBrokerFiles:
    """The CA, client certificate and password files the local broker writes (tools.broker)."""

    directory: Path

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def client_cert_file(self) -> Path:
        return self.directory / "client.pem"

    @property
    def client_key_file(self) -> Path:
        return self.directory / "client.key"

    def password_file(self, user: str) -> Path:
        return self.directory / f"{user}.password"


def _one_of(name: str, raw: str, allowed: tuple[str, ...]) -> str:
    value = raw.strip().upper()
    if value not in allowed:
        raise SecurityError(f"{name}={raw!r} is not valid: use one of {', '.join(allowed)}")
    return value


def _existing_file(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser().resolve()
    if not path.is_file():
        raise SecurityError(f"{name}={raw!r} is not valid: no such file")
    return path


def parse_flag(raw: str) -> bool:
    """``true`` or ``false``, in any case; anything else raises ValueError."""
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(raw)
    return value == "true"


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "")
    try:
        return parse_flag(raw) if raw.strip() else default
    except ValueError:
        raise SecurityError(f"{name}={raw!r} is not valid: use true or false") from None


def _password(env: Mapping[str, str], fallback: Callable[[], Path | None]) -> Secret | None:
    value, file = env.get("KAFKA_SASL_PASSWORD", ""), _existing_file(env, "KAFKA_SASL_PASSWORD_FILE")
    if value and file:
        raise SecurityError("KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE are both set: keep one")
    if file is not None:
        secret = Secret(file=file)
        secret.reveal()  # an unreadable file fails now, with its name
        return secret
    if value:
        return Secret(value)
    local = fallback()
    return Secret(file=local) if local is not None else None


def read_security(env: Mapping[str, str], local: LocalBrokerFiles | None) -> KafkaSecurity:
    """The security settings in ``env``; ``local`` fills in the local broker's files when it is used."""
    protocol = _one_of("KAFKA_SECURITY_PROTOCOL", env.get("KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT", PROTOCOLS)
    tls, sasl = protocol in TLS_PROTOCOLS, protocol in SASL_PROTOCOLS
    for name in ("KAFKA_SSL_CA_FILE", "KAFKA_SSL_CERT_FILE", "KAFKA_SSL_KEY_FILE", "KAFKA_SSL_CHECK_HOSTNAME"):
        if env.get(name) and not tls:
            raise SecurityError(f"{name} is set but KAFKA_SECURITY_PROTOCOL={protocol} uses no TLS: "
                                "use SSL or SASL_SSL, or unset it")
    for name in ("KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SASL_PASSWORD_FILE"):
        if env.get(name) and not sasl:
            raise SecurityError(f"{name} is set but KAFKA_SECURITY_PROTOCOL={protocol} uses no SASL: "
                                "use SASL_SSL or SASL_PLAINTEXT, or unset it")
    if not tls and not sasl:
        return KafkaSecurity()
    ca_file = _existing_file(env, "KAFKA_SSL_CA_FILE")
    cert_file, key_file = _existing_file(env, "KAFKA_SSL_CERT_FILE"), _existing_file(env, "KAFKA_SSL_KEY_FILE")
    if (cert_file is None) != (key_file is None):
        raise SecurityError("KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE go together: set both for mutual TLS, "
                            "or neither")
    if local is not None and tls:
        ca_file = ca_file or local.ca_file
        if protocol == "SSL" and cert_file is None:  # the local SSL listener asks for a client certificate
            cert_file, key_file = local.client_cert_file, local.client_key_file
    security = KafkaSecurity(protocol=protocol, ca_file=ca_file, cert_file=cert_file, key_file=key_file,
                             check_hostname=_flag(env, "KAFKA_SSL_CHECK_HOSTNAME", True))
    if not sasl:
        return security
    raw_mechanism = env.get("KAFKA_SASL_MECHANISM") or ("SCRAM-SHA-512" if local is not None else "")
    if not raw_mechanism:
        raise SecurityError(f"KAFKA_SECURITY_PROTOCOL={protocol} needs KAFKA_SASL_MECHANISM: "
                            f"one of {', '.join(MECHANISMS)}")
    mechanism = _one_of("KAFKA_SASL_MECHANISM", raw_mechanism, MECHANISMS)
    username = env.get("KAFKA_SASL_USERNAME", "").strip() or (LOCAL_USER if local is not None else "")
    password = _password(env, lambda: local.password_file(username) if local is not None else None)
    if not username:
        raise SecurityError(f"KAFKA_SECURITY_PROTOCOL={protocol} needs KAFKA_SASL_USERNAME")
    if password is None:
        raise SecurityError(f"KAFKA_SECURITY_PROTOCOL={protocol} needs KAFKA_SASL_PASSWORD "
                            "or KAFKA_SASL_PASSWORD_FILE")
    return replace(security, sasl_mechanism=mechanism, username=username, password=password)
