"""TLS and SASL (PLAIN, SCRAM-SHA-256/512) for the wire client, from librdkafka's settings.

:class:`WireSecurity` wraps a connection's socket in TLS and authenticates it
right after ApiVersions: SaslHandshake v1, then SaslAuthenticate v1 rounds
(RFC 4616 for PLAIN, RFC 5802 for SCRAM). A refusal raises
:class:`KafkaSecurityError`, one line that says what to fix; it is never
worth retrying. :func:`cluster` opens a :class:`~kafka_ops.wire.Cluster` with it.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import socket
import ssl
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from kafka_ops.wire import Cluster, KafkaWireError, tls_failure

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SCRAM_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}

#: sends one request with a v1 header (api key, version, body) and returns the response body
Exchange = Callable[[int, int, bytes], bytes]


class KafkaSecurityError(KafkaWireError):
    """TLS or SASL refused the connection: a setting to fix, not a broker to wait for."""

    retriable = False


def cluster(client: Mapping[str, Any], timeout_s: float = 10.0) -> Cluster:
    """A :class:`Cluster` of librdkafka settings: ``bootstrap.servers``, and the security ones if any."""
    return Cluster(str(client.get("bootstrap.servers", "")), timeout_s, WireSecurity.of(client))


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


class _Body:
    """Reads the non-flexible SASL responses."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int16(self) -> int:
        (value,) = struct.unpack_from(">h", self.data, self.pos)
        self.pos += 2
        return value

    def sized(self, width: str) -> Optional[bytes]:
        (size,) = struct.unpack_from(width, self.data, self.pos)
        self.pos += struct.calcsize(width)
        if size < 0:
            return None
        value = self.data[self.pos:self.pos + size]
        self.pos += size
        return value


def new_nonce() -> str:
    """The client's SCRAM nonce: 24 random bytes, printable."""
    return base64.b64encode(secrets.token_bytes(24)).decode()


def _saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


@dataclass(frozen=True)
class WireSecurity:
    """How one client's connections are encrypted and authenticated."""

    tls: Optional[ssl.SSLContext] = None
    mechanism: Optional[str] = None
    username: str = ""
    password: str = field(default="", repr=False)

    @classmethod
    def of(cls, client: Mapping[str, Any]) -> WireSecurity:
        """From librdkafka settings: ``security.protocol``, ``ssl.*`` and ``sasl.*``."""
        protocol = str(client.get("security.protocol", "PLAINTEXT")).upper()
        tls = None
        if protocol in ("SSL", "SASL_SSL"):
            try:
                tls = ssl.create_default_context(cafile=client.get("ssl.ca.location"))
                tls.check_hostname = client.get("ssl.endpoint.identification.algorithm", "https") != "none"
                if client.get("ssl.certificate.location"):
                    tls.load_cert_chain(client["ssl.certificate.location"], client.get("ssl.key.location"),
                                        client.get("ssl.key.password"))
            except (OSError, ssl.SSLError) as exc:
                raise KafkaSecurityError(f"cannot load the TLS files: {exc}") from None
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return cls(tls)
        mechanism = str(client.get("sasl.mechanism") or client.get("sasl.mechanisms") or "").upper()
        if mechanism != "PLAIN" and mechanism not in SCRAM_HASHES:
            raise KafkaSecurityError(f"SASL mechanism {mechanism!r} is not supported: use PLAIN, SCRAM-SHA-256 "
                                     "or SCRAM-SHA-512")
        return cls(tls, mechanism, str(client.get("sasl.username", "")), str(client.get("sasl.password", "")))

    def wrap(self, sock: socket.socket, host: str, address: str) -> socket.socket:
        """``sock`` in TLS, with the broker's certificate checked; the socket itself without TLS."""
        if self.tls is None:
            return sock
        try:
            return self.tls.wrap_socket(sock, server_hostname=host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise KafkaSecurityError(f"the TLS certificate of Kafka at {address} was refused: "
                                     f"{exc.verify_message} "
                                     "(see KAFKA_SSL_CA_FILE, KAFKA_SSL_CHECK_HOSTNAME)") from None
        except ssl.SSLError as exc:
            sock.close()
            raise tls_failure(exc, address) from None
        except OSError as exc:  # a timeout or a reset: the broker may be going down, so worth a retry
            sock.close()
            raise KafkaWireError(f"lost the connection to Kafka at {address} during the TLS handshake: "
                                 f"{exc.strerror or exc}") from None

    def authenticate(self, exchange: Exchange, address: str) -> None:
        """Authenticate a new connection with SASL, if configured."""
        if self.mechanism is None:
            return
        handshake = _Body(exchange(SASL_HANDSHAKE, 1, _string(self.mechanism)))
        error = handshake.int16()
        if error:
            raise KafkaSecurityError(f"Kafka at {address} does not offer SASL mechanism {self.mechanism} "
                                     "(see KAFKA_SASL_MECHANISM)")
        if self.mechanism == "PLAIN":
            self._round(exchange, address, f"\0{self.username}\0{self.password}".encode())
        else:
            self._scram(exchange, address)

    def _round(self, exchange: Exchange, address: str, sent: bytes) -> bytes:
        body = _Body(exchange(SASL_AUTHENTICATE, 1, _bytes(sent)))
        error, message = body.int16(), body.sized(">h")
        if error:
            reason = message.decode(errors="replace") if message else f"error code {error}"
            raise KafkaSecurityError(f"Kafka at {address} refused the SASL login of user {self.username!r}: "
                                     f"{reason} (see KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD)")
        return body.sized(">i") or b""

    def _scram(self, exchange: Exchange, address: str) -> None:
        digest = SCRAM_HASHES[str(self.mechanism)]
        nonce = new_nonce()
        first_bare = f"n={_saslname(self.username)},r={nonce}"
        server_first = self._round(exchange, address, f"n,,{first_bare}".encode()).decode()
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        if not fields.get("r", "").startswith(nonce):
            raise KafkaSecurityError(f"Kafka at {address} answered SCRAM with a nonce that is not ours")
        salted = hashlib.pbkdf2_hmac(digest().name, self.password.encode(), base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        final_bare = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first},{final_bare}".encode()
        client_key = hmac.digest(salted, b"Client Key", digest)
        signature = hmac.digest(digest(client_key).digest(), auth_message, digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_final = self._round(exchange, address,
                                   f"{final_bare},p={base64.b64encode(proof).decode()}".encode()).decode()
        expected = hmac.digest(hmac.digest(salted, b"Server Key", digest), auth_message, digest)
        if server_final != f"v={base64.b64encode(expected).decode()}":
            raise KafkaSecurityError(f"Kafka at {address} could not prove it knows the SCRAM password")
