"""One set of security settings for Faust's aiokafka clients and the layer's librdkafka ones.

The layer commits through confluent-kafka (librdkafka) clients beside Faust's
aiokafka consumer, and librdkafka cannot use an :class:`ssl.SSLContext`. So
the settings are given once, in librdkafka's spelling, and
:func:`credentials` turns them into Faust credentials that also carry them::

    app = faust.App("my-app", broker="eos://kafka:9093", ...,
                    broker_credentials=faust_eos.credentials({
                        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                        "sasl.username": "my-app", "sasl.password": password,
                        "ssl.ca.location": "/etc/kafka/ca.pem"}))

Faust's own ``faust.SASLCredentials`` without TLS work too; credentials with an
SSL context of their own are refused at start (:func:`client_settings`).
"""
from __future__ import annotations

import ssl
from typing import Any, Mapping, Optional

import faust
from faust.types.auth import AuthProtocol

from faust_eos.errors import SettingRefused

#: the librdkafka settings :func:`credentials` understands
KNOWN_SETTINGS = frozenset({
    "security.protocol", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
    "sasl.password",
})
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SASLCredentials(faust.SASLCredentials):
    """Faust's SASL credentials, carrying the librdkafka settings they were made from."""

    def __init__(self, librdkafka: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.librdkafka = dict(librdkafka)


class SSLCredentials(faust.SSLCredentials):
    """Faust's TLS credentials, carrying the librdkafka settings they were made from."""

    def __init__(self, librdkafka: Mapping[str, str], context: ssl.SSLContext) -> None:
        super().__init__(context)
        self.librdkafka = dict(librdkafka)


def ssl_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """A client TLS context from librdkafka's ``ssl.*`` settings (the system's CAs by default)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=settings.get("ssl.ca.location"))
    context.check_hostname = settings.get("ssl.endpoint.identification.algorithm", "https") != "none"
    if settings.get("ssl.certificate.location"):
        context.load_cert_chain(settings["ssl.certificate.location"], settings.get("ssl.key.location"),
                                settings.get("ssl.key.password"))
    return context


def credentials(settings: Mapping[str, str]) -> Optional[faust.types.auth.CredentialsT]:
    """Faust ``broker_credentials`` from librdkafka security settings; None for PLAINTEXT.

    Raises :class:`SettingRefused` for a setting or value it does not know.
    """
    unknown = sorted(set(settings) - KNOWN_SETTINGS)
    if unknown:
        raise SettingRefused(f"faust_eos.credentials() does not know {', '.join(unknown)}: "
                             f"it takes {', '.join(sorted(KNOWN_SETTINGS))}")
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    try:
        AuthProtocol(protocol)
    except ValueError:
        raise SettingRefused(f"security.protocol={protocol!r} is not one of "
                             f"{', '.join(p.value for p in AuthProtocol)}") from None
    spelled = {**settings, "security.protocol": protocol}
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = ssl_context(spelled)
        except (OSError, ssl.SSLError) as exc:
            raise SettingRefused(f"cannot load the TLS files of the Kafka settings: {exc}") from None
    if protocol == "PLAINTEXT":
        return None
    if protocol == "SSL":
        assert context is not None
        return SSLCredentials(spelled, context)
    mechanism = (spelled.get("sasl.mechanism") or spelled.get("sasl.mechanisms") or "").upper()
    if mechanism not in SASL_MECHANISMS:
        raise SettingRefused(f"sasl.mechanism={mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}")
    if not spelled.get("sasl.username") or spelled.get("sasl.password") is None:
        raise SettingRefused(f"security.protocol={protocol} needs sasl.username and sasl.password")
    return SASLCredentials(spelled, username=spelled["sasl.username"], password=spelled["sasl.password"],
                           ssl_context=context, mechanism=mechanism)


def librdkafka_client(conf: Any) -> dict[str, str]:
    """What every librdkafka client of a Faust app starts from: its brokers and :func:`client_settings`."""
    brokers = ",".join(f"{url.host}:{url.port or 9092}" for url in conf.broker)
    return {"bootstrap.servers": brokers, **client_settings(conf)}


def client_settings(conf: Any) -> dict[str, str]:
    """The librdkafka security settings matching a Faust app's ``broker_credentials`` (``conf``: ``app.conf``)."""
    given = conf.broker_credentials
    if given is None and conf.ssl_context is None:
        return {}
    carried = getattr(given, "librdkafka", None)
    if carried is not None:
        return dict(carried)
    if isinstance(given, faust.SASLCredentials) and given.ssl_context is None and conf.ssl_context is None:
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": given.mechanism.value,
                "sasl.username": given.username or "", "sasl.password": given.password or ""}
    raise SettingRefused(
        f"the exactly-once layer's librdkafka clients cannot use broker_credentials={given!r} "
        "(an ssl.SSLContext cannot be handed to librdkafka): build them with "
        "faust_eos.credentials({'security.protocol': ..., 'ssl.ca.location': ..., ...})")
