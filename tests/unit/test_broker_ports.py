"""The local broker's ports and the ports this machine gives outgoing connections."""
from __future__ import annotations

from tools.broker_process import ephemeral_port_warning, ephemeral_ports


def test_ports_below_the_outgoing_range_draw_no_warning():
    assert ephemeral_port_warning([9092, 9093, 9094, 9095], range(32768, 61000)) is None


def test_a_port_in_the_outgoing_range_is_named_with_the_range_and_what_to_do():
    warning = ephemeral_port_warning([29092, 49092, 49093], range(32768, 61000))
    assert warning is not None and "\n" not in warning
    assert "ports 49092, 49093 lie" in warning and "(32768-60999)" in warning and "below it" in warning


def test_the_outgoing_range_is_read_from_the_kernel_or_defaults_to_linux_s(tmp_path):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("40000\t50000\n")
    assert ephemeral_ports(range_file) == range(40000, 50001)
    assert ephemeral_ports(tmp_path / "missing") == range(32768, 61000)
