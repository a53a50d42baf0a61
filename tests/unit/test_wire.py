"""The protocol primitives: what is encoded reads back the same; bad addresses are refused;
only a Kafka broker answers Kafka."""
import socket
import threading

import pytest

from kafka_ops.wire import (
    KafkaWireError,
    Reader,
    answers_kafka,
    bootstrap_addresses,
    compact_array,
    compact_string,
    int32,
    int64,
    uvarint,
)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_383, 16_384, 2**31 - 1])
def test_unsigned_varints_read_back(value):
    reader = Reader(uvarint(value))
    assert reader.uvarint() == value and reader.done()


def test_unsigned_varint_layout_matches_the_protocol():
    assert uvarint(0) == b"\x00" and uvarint(127) == b"\x7f" and uvarint(300) == b"\xac\x02"


def test_compact_strings_store_length_plus_one_and_null_as_zero():
    assert compact_string("ab") == b"\x03ab"
    assert compact_string("") == b"\x01"
    assert compact_string(None) == b"\x00"
    reader = Reader(compact_string("ünï") + compact_string(None))
    assert reader.compact_string() == "ünï" and reader.compact_string() is None and reader.done()


def test_compact_arrays_read_back():
    data = compact_array([3, -1, 2**40], int64) + compact_array([], int32)
    reader = Reader(data)
    assert reader.compact_array(reader.int64) == [3, -1, 2**40]
    assert reader.compact_array(reader.int32) == []
    assert reader.done()


def test_tagged_fields_are_skipped():
    tagged = uvarint(2) + uvarint(0) + uvarint(3) + b"xyz" + uvarint(5) + uvarint(1) + b"q"
    reader = Reader(tagged + int32(7))
    reader.tags()
    assert reader.int32() == 7 and reader.done()


def test_bootstrap_addresses_accept_lists_and_listener_prefixes():
    assert bootstrap_addresses("a:9092, PLAINTEXT://b:19092,[::1]:9093") == [
        ("a", 9092), ("b", 19092), ("::1", 9093)]


@pytest.mark.parametrize("servers", ["", "host", "host:port", ":9092"])
def test_bad_bootstrap_addresses_are_refused(servers):
    with pytest.raises(KafkaWireError):
        bootstrap_addresses(servers)


def test_a_port_nobody_listens_on_does_not_answer_kafka():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert not answers_kafka(f"127.0.0.1:{port}", timeout_s=1.0)


def test_a_peer_speaking_another_protocol_does_not_answer_kafka():
    with socket.create_server(("127.0.0.1", 0)) as server:
        def answer_like_a_web_server() -> None:
            connection, _ = server.accept()
            with connection:
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        thread = threading.Thread(target=answer_like_a_web_server, daemon=True)
        thread.start()
        assert not answers_kafka(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=5.0)
        thread.join()
