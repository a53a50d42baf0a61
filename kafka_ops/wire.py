"""The project's one Kafka protocol client: a small blocking one, standard library only.

It speaks what the Python clients lack or cannot be used for: ListTransactions,
DescribeTransactions, DescribeProducers and WriteTxnMarkers (and FindCoordinator
and Metadata, to route them), and it tells whether a broker answers at all
(:func:`answers_kafka`, for the broker script, which runs before the virtualenv
has packages). Every request after ApiVersions is a "flexible" version: compact
strings and arrays, and tagged fields (always sent empty, skipped when read).
"""
from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Protocol, TypeVar

CLIENT_ID = b"faust-eos-ops"
MAX_RESPONSE_BYTES = 64 << 20  # a larger size means the peer is not speaking Kafka
TLS_ALERT = 0x15  # the first byte of a TLS alert record: a TLS listener refusing a plaintext request

API_VERSIONS = 18
METADATA = 3
FIND_COORDINATOR = 10
WRITE_TXN_MARKERS = 27
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66

API_NAMES = {
    METADATA: "Metadata",
    FIND_COORDINATOR: "FindCoordinator",
    WRITE_TXN_MARKERS: "WriteTxnMarkers",
    DESCRIBE_PRODUCERS: "DescribeProducers",
    DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    LIST_TRANSACTIONS: "ListTransactions",
}

#: the versions this module speaks: (api key) -> (lowest, highest)
SUPPORTED = {
    METADATA: (9, 12),
    FIND_COORDINATOR: (4, 6),
    WRITE_TXN_MARKERS: (1, 1),
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 0),
}

#: error codes the tools explain by name; others are shown as numbers
ERROR_NAMES = {
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    6: "NOT_LEADER_OR_FOLLOWER",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE",
    51: "CONCURRENT_TRANSACTIONS",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    90: "PRODUCER_FENCED",
    105: "TRANSACTIONAL_ID_NOT_FOUND",
}

T = TypeVar("T")


class KafkaWireError(RuntimeError):
    """The broker could not be reached or refused a request; one line for the operator."""

    #: False for a refusal that waiting cannot cure (a TLS or SASL setting)
    retriable = True

    def __init__(self, message: str, retriable: Optional[bool] = None) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable


class Security(Protocol):
    """Encrypts and authenticates new connections (:class:`kafka_ops.wire_security.WireSecurity`)."""

    def wrap(self, sock: socket.socket, host: str, address: str) -> socket.socket: ...

    def authenticate(self, exchange: Callable[[int, int, bytes], bytes], address: str) -> None: ...


#: what a TLS failure's reason means for the operator, by a word in it
TLS_HINTS = (
    ("CERTIFICATE_EXPIRED", "the broker refused the client certificate: it has expired (see KAFKA_SSL_CERT_FILE)"),
    ("CERTIFICATE_UNKNOWN", "the broker refused the client certificate: it has expired, or no CA the broker "
                            "trusts signed it (see KAFKA_SSL_CERT_FILE)"),
    ("UNKNOWN_CA", "the broker does not trust the client certificate's CA (see KAFKA_SSL_CERT_FILE)"),
    ("CERTIFICATE_REQUIRED", "the listener needs a client certificate (see KAFKA_SSL_CERT_FILE, KAFKA_SSL_KEY_FILE)"),
    ("BAD_CERTIFICATE", "the broker refused the client certificate, or needs one "
                        "(see KAFKA_SSL_CERT_FILE, KAFKA_SSL_KEY_FILE)"),
    ("WRONG_VERSION_NUMBER", "it does not answer in TLS: is it a PLAINTEXT listener? (see KAFKA_SECURITY_PROTOCOL)"),
)
#: a TLS session cut short: a broker going down, or a PLAINTEXT listener dropping the handshake; worth a retry
TLS_CUT_SHORT = ("EOF", "it closed the connection during TLS: is it a PLAINTEXT listener? "
                        "(see KAFKA_SECURITY_PROTOCOL)")


def tls_failure(exc: ssl.SSLError, address: str) -> KafkaWireError:
    """One line for a TLS session that failed; retriable unless the broker refused it (a TLS alert)."""
    reason = str(exc.reason or exc)
    refusal = next((text for word, text in TLS_HINTS if word in reason.upper()), None)
    hint = refusal or (TLS_CUT_SHORT[1] if TLS_CUT_SHORT[0] in reason.upper() else "see KAFKA_SECURITY_PROTOCOL")
    return KafkaWireError(f"TLS with Kafka at {address} failed ({reason}): {hint}", retriable=refusal is None)


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"error code {code}")


# --- encoding ----------------------------------------------------------------


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(value: str | None) -> bytes:
    if value is None:
        return uvarint(0)
    data = value.encode()
    return uvarint(len(data) + 1) + data


def compact_array(items: list[T], encode: Callable[[T], bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(encode(item) for item in items)


NO_TAGS = uvarint(0)


def int8(value: int) -> bytes:
    return struct.pack(">b", value)


def int16(value: int) -> bytes:
    return struct.pack(">h", value)


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)


# --- decoding ----------------------------------------------------------------


class Reader:
    """Reads a response body field by field."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int8(self) -> int:
        return self._unpack(">b")

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def boolean(self) -> bool:
        return self._unpack(">?")

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str | None:
        return self._text(self.uvarint() - 1)

    def string(self) -> str | None:
        """A non-flexible (int16-length) string."""
        return self._text(self.int16())

    def _text(self, length: int) -> str | None:
        if length < 0:
            return None
        value = self.data[self.pos : self.pos + length].decode()
        self.pos += length
        return value

    def compact_array(self, read: Callable[[], T]) -> list[T]:
        count = self.uvarint() - 1
        return [read() for _ in range(max(count, 0))]

    def array(self, read: Callable[[], T]) -> list[T]:
        """A non-flexible (int32-count) array; a null one reads as empty."""
        count = self.int32()
        return [read() for _ in range(max(count, 0))]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()
            self.pos += size  # skip the value

    def done(self) -> bool:
        return self.pos == len(self.data)


# --- connections -------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class Connection:
    """One TCP connection to one broker, with the API versions it supports."""

    def __init__(self, host: str, port: int, timeout_s: float, security: Optional[Security] = None) -> None:
        self.address = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise KafkaWireError(f"cannot reach Kafka at {self.address}: {exc.strerror or exc}") from None
        sock.settimeout(timeout_s)
        self.sock = security.wrap(sock, host, self.address) if security is not None else sock
        self._correlation = 0
        try:
            self.versions = self._api_versions()
            if security is not None:
                security.authenticate(self.request_v1, self.address)
        except BaseException:
            self.sock.close()
            raise

    def close(self) -> None:
        self.sock.close()

    def _exchange(self, header: bytes, body: bytes) -> bytes:
        self._correlation += 1
        try:
            self.sock.sendall(int32(len(header) + len(body)) + header + body)
            head = self._read(4)
            (size,) = struct.unpack(">i", head)
            if head[0] == TLS_ALERT and head[1] == 3:
                raise KafkaWireError(f"Kafka at {self.address} answered in TLS: it is a TLS listener "
                                     "(set KAFKA_SECURITY_PROTOCOL to SSL or SASL_SSL)", retriable=False)
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise KafkaWireError(f"{self.address} answered with an implausible size {size}: is it a Kafka broker?")
            response = self._read(size)
        except ssl.SSLError as exc:  # e.g. an alert after the handshake: the broker refusing our certificate
            raise tls_failure(exc, self.address) from None
        except OSError as exc:
            raise KafkaWireError(f"lost the connection to Kafka at {self.address}: {exc}") from None
        if struct.unpack_from(">i", response)[0] != self._correlation:
            raise KafkaWireError(f"Kafka at {self.address} answered out of order")
        return response[4:]

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise KafkaWireError(f"Kafka at {self.address} closed the connection")
            data += chunk
        return data

    def request_v1(self, api_key: int, version: int, body: bytes) -> bytes:
        """Send a non-flexible request (header v1); return the body of its answer (response header v0)."""
        header = int16(api_key) + int16(version) + int32(self._correlation + 1) + int16(len(CLIENT_ID)) + CLIENT_ID
        return self._exchange(header, body)

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v0."""
        reader = Reader(self.request_v1(API_VERSIONS, 0, b""))
        error = reader.int16()
        if error:
            raise KafkaWireError(f"Kafka at {self.address} refused ApiVersions: {error_name(error)}")
        count = reader.int32()
        return {key: (low, high) for key, low, high in (
            (reader.int16(), reader.int16(), reader.int16()) for _ in range(count))}

    def version(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides speak."""
        ours_low, ours_high = SUPPORTED[api_key]
        low, high = self.versions.get(api_key, (0, -1))
        version = min(high, ours_high)
        if version < max(low, ours_low):
            raise KafkaWireError(
                f"Kafka at {self.address} does not support {API_NAMES[api_key]} v{ours_low}-v{ours_high} "
                f"(it has {'v%d-v%d' % (low, high) if high >= 0 else 'none'}): brokers 3.0 or newer are needed"
            )
        return version

    def call(self, api_key: int, body: Callable[[int], bytes]) -> tuple[int, Reader]:
        """Send a flexible request (header v2) built by ``body(version)``; return the version and a reader."""
        version = self.version(api_key)
        header = (int16(api_key) + int16(version) + int32(self._correlation + 1)
                  + int16(len(CLIENT_ID)) + CLIENT_ID + NO_TAGS)
        reader = Reader(self._exchange(header, body(version)))
        reader.tags()  # response header v1
        return version, reader


def bootstrap_addresses(servers: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as pairs; a bad entry raises :class:`KafkaWireError`."""
    addresses = []
    for entry in filter(None, (part.strip() for part in servers.split(","))):
        host, _, port = entry.rpartition("://")[2].rpartition(":")
        if not host or not port.isdigit():
            raise KafkaWireError(f"bootstrap server {entry!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise KafkaWireError("no bootstrap servers given")
    return addresses


class Cluster:
    """Connections to the brokers of one cluster, opened as needed."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = 10.0, security: Optional[Security] = None) -> None:
        self.timeout_s = timeout_s
        self.security = security
        self._connections: dict[int, Connection] = {}
        self.bootstrap = self._connect_any(bootstrap_addresses(bootstrap_servers))
        try:
            self.nodes = self._brokers()
        except BaseException:
            self.bootstrap.close()
            raise

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in {id(c): c for c in [self.bootstrap, *self._connections.values()]}.values():
            connection.close()

    def _connect_any(self, addresses: list[tuple[str, int]]) -> Connection:
        errors = []
        for host, port in addresses:
            try:
                return Connection(host, port, self.timeout_s, self.security)
            except KafkaWireError as exc:
                if not exc.retriable:
                    raise
                errors.append(str(exc))
        raise KafkaWireError("; ".join(errors))

    def _brokers(self) -> dict[int, Node]:
        """Metadata with no topics: the live brokers."""

        def body(version: int) -> bytes:
            topics = uvarint(1)  # an empty array: no topics
            flags = int8(0)  # allow_auto_topic_creation
            if version <= 10:
                flags += int8(0)  # include_cluster_authorized_operations (v8-v10)
            return topics + flags + int8(0) + NO_TAGS  # include_topic_authorized_operations

        _, reader = self.bootstrap.call(METADATA, body)
        reader.int32()  # throttle_time_ms

        def broker() -> Node:
            node = Node(reader.int32(), reader.compact_string() or "", reader.int32())
            reader.compact_string()  # rack
            reader.tags()
            return node

        return {node.node_id: node for node in reader.compact_array(broker)}

    def connection(self, node_id: int) -> Connection:
        if node_id not in self._connections:
            node = self.nodes.get(node_id)
            if node is None:
                raise KafkaWireError(f"broker {node_id} is not in the cluster's metadata")
            if f"{node.host}:{node.port}" == self.bootstrap.address:
                self._connections[node_id] = self.bootstrap
            else:
                self._connections[node_id] = Connection(node.host, node.port, self.timeout_s, self.security)
        return self._connections[node_id]

    def each_broker(self) -> Iterator[tuple[int, Connection]]:
        for node_id in sorted(self.nodes):
            yield node_id, self.connection(node_id)


def answers_kafka(bootstrap_servers: str, timeout_s: float = 5.0, security: Optional[Security] = None) -> bool:
    """True if a broker of ``bootstrap_servers`` answers ApiVersions and Metadata lists a live broker.

    A refusal of the security settings raises it (:class:`KafkaWireError` that is not retriable).
    """
    try:
        with Cluster(bootstrap_servers, timeout_s=timeout_s, security=security) as cluster:
            return bool(cluster.nodes)
    except KafkaWireError as exc:
        if not exc.retriable:
            raise
        return False
    except (struct.error, IndexError, UnicodeDecodeError):  # a peer not speaking Kafka
        return False
