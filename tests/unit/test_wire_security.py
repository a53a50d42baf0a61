"""The wire client's SASL logins, against a scripted broker: PLAIN (RFC 4616) and SCRAM (RFC 7677's example);
which TLS failures are refusals and which are worth a retry."""
import ssl
import struct

import pytest

from kafka_ops import wire_security
from kafka_ops.wire import KafkaWireError, tls_failure
from kafka_ops.wire_security import SASL_AUTHENTICATE, SASL_HANDSHAKE, KafkaSecurityError, WireSecurity

RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def handshake_ok() -> bytes:
    return struct.pack(">hi", 0, 1) + struct.pack(">h", 13) + b"SCRAM-SHA-256"


def authenticated(payload: bytes = b"", error: int = 0, message: str | None = None) -> bytes:
    text = struct.pack(">h", -1) if message is None else struct.pack(">h", len(message)) + message.encode()
    return struct.pack(">h", error) + text + struct.pack(">i", len(payload)) + payload + struct.pack(">q", 0)


class ScriptedBroker:
    """Answers each request with the next scripted response and keeps what the client sent."""

    def __init__(self, *responses: bytes) -> None:
        self.responses = list(responses)
        self.sent: list[tuple[int, int, bytes]] = []

    def __call__(self, api_key: int, version: int, body: bytes) -> bytes:
        self.sent.append((api_key, version, body))
        return self.responses.pop(0)

    def auth_bytes(self, index: int) -> bytes:
        body = self.sent[index][2]
        (size,) = struct.unpack_from(">i", body)
        return body[4:4 + size]


def test_scram_sha_256_sends_the_rfc_messages_and_checks_the_server_signature(monkeypatch):
    monkeypatch.setattr(wire_security, "new_nonce", lambda: RFC_NONCE)
    broker = ScriptedBroker(handshake_ok(), authenticated(RFC_SERVER_FIRST.encode()),
                            authenticated(RFC_SERVER_FINAL.encode()))
    WireSecurity(mechanism="SCRAM-SHA-256", username="user", password="pencil").authenticate(broker, "k:1")

    assert [(key, version) for key, version, _ in broker.sent] == [
        (SASL_HANDSHAKE, 1), (SASL_AUTHENTICATE, 1), (SASL_AUTHENTICATE, 1)]
    assert broker.sent[0][2] == struct.pack(">h", 13) + b"SCRAM-SHA-256"
    assert broker.auth_bytes(1) == f"n,,n=user,r={RFC_NONCE}".encode()
    assert broker.auth_bytes(2) == RFC_CLIENT_FINAL.encode()


def test_a_server_that_does_not_know_the_password_is_not_trusted(monkeypatch):
    monkeypatch.setattr(wire_security, "new_nonce", lambda: RFC_NONCE)
    broker = ScriptedBroker(handshake_ok(), authenticated(RFC_SERVER_FIRST.encode()),
                            authenticated(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="))
    with pytest.raises(KafkaSecurityError, match="could not prove it knows the SCRAM password"):
        WireSecurity(mechanism="SCRAM-SHA-256", username="user", password="pencil").authenticate(broker, "k:1")


def test_plain_sends_the_username_and_password_in_one_message():
    broker = ScriptedBroker(handshake_ok(), authenticated())
    WireSecurity(mechanism="PLAIN", username="team", password="hunter2").authenticate(broker, "k:1")
    assert broker.auth_bytes(1) == b"\0team\0hunter2"


def test_a_refused_login_is_one_line_naming_the_user_and_the_settings():
    broker = ScriptedBroker(handshake_ok(), authenticated(error=58, message="Authentication failed"))
    with pytest.raises(KafkaSecurityError) as refused:
        WireSecurity(mechanism="PLAIN", username="team", password="hunter2").authenticate(broker, "k:1")
    line = str(refused.value)
    assert "refused the SASL login of user 'team': Authentication failed" in line
    assert "KAFKA_SASL_PASSWORD" in line and "hunter2" not in line
    assert not refused.value.retriable


def test_a_mechanism_the_broker_lacks_is_named():
    broker = ScriptedBroker(struct.pack(">hi", 33, 0))
    with pytest.raises(KafkaSecurityError, match="does not offer SASL mechanism SCRAM-SHA-512"):
        WireSecurity(mechanism="SCRAM-SHA-512", username="u", password="p").authenticate(broker, "k:1")


def test_without_sasl_nothing_is_sent():
    broker = ScriptedBroker()
    WireSecurity().authenticate(broker, "k:1")
    assert broker.sent == []


def test_settings_are_read_in_librdkafkas_spelling():
    security = WireSecurity.of({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "scram-sha-512",
                                "sasl.username": "u", "sasl.password": "p"})
    assert (security.tls, security.mechanism, security.username) == (None, "SCRAM-SHA-512", "u")
    with pytest.raises(KafkaSecurityError, match="'GSSAPI' is not supported"):
        WireSecurity.of({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})


def tls_error(reason: str, kind: type = ssl.SSLError) -> ssl.SSLError:
    error = kind(1, f"[SSL: {reason}] {reason.lower()}")
    error.reason = reason
    return error


@pytest.mark.parametrize("reason, words", [
    ("SSLV3_ALERT_CERTIFICATE_UNKNOWN", "it has expired, or no CA the broker trusts signed it"),
    ("SSLV3_ALERT_BAD_CERTIFICATE", "the broker refused the client certificate, or needs one"),
    ("WRONG_VERSION_NUMBER", "is it a PLAINTEXT listener?"),
])
def test_a_tls_alert_is_a_refusal_not_worth_retrying(reason, words):
    failure = tls_failure(tls_error(reason), "k:1")
    assert words in str(failure) and not failure.retriable


def test_a_tls_session_cut_short_is_worth_retrying():
    failure = tls_failure(tls_error("UNEXPECTED_EOF_WHILE_READING", ssl.SSLEOFError), "k:1")
    assert failure.retriable and "is it a PLAINTEXT listener?" in str(failure)


def test_a_handshake_that_times_out_is_worth_retrying():
    class SlowContext:
        def wrap_socket(self, sock, server_hostname):
            raise TimeoutError("timed out")

    class Socket:
        def close(self):
            pass

    with pytest.raises(KafkaWireError) as lost:
        WireSecurity(tls=SlowContext()).wrap(Socket(), "k", "k:1")
    assert lost.value.retriable and "during the TLS handshake: timed out" in str(lost.value)


def test_the_password_does_not_show_in_the_security_it_is_kept_in():
    assert "hunter2" not in repr(WireSecurity(mechanism="PLAIN", username="team", password="hunter2"))
