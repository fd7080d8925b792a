"""The monitor address of scaler 1.x's documents (`scaler_top ipc:///tmp/127.0.0.1_2345_monitor`): the monitor tools
read the monitor of the scheduler it names, at its port + 2, unless that ipc socket exists
(`scaler.io.address.monitor_address_to_read`). Checked by switching it off: with the function returning the address
as given, every translation below fails."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from scaler.io.address import (
    AddressError,
    is_socket_file,
    monitor_address_to_read,
    reference_monitor_scheduler,
)

pytestmark = pytest.mark.timeout(10)


def no_socket(_path: str) -> bool:
    return False


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("ipc:///tmp/127.0.0.1_2345_monitor", "tcp://127.0.0.1:2347"),
        ("ipc:///tmp/0.0.0.0_8516_monitor", "tcp://127.0.0.1:8518"),
        ("ipc:///tmp/*_8516_monitor", "tcp://127.0.0.1:8518"),
        ("ipc:///tmp/compute-01.example.com_9000_monitor", "tcp://compute-01.example.com:9002"),
        ("ipc:///tmp/my_host_9000_monitor", "tcp://my_host:9002"),
    ],
)
def test_a_1_x_default_monitor_name_is_read_at_the_schedulers_port_plus_2(given: str, read: str) -> None:
    address, why = monitor_address_to_read(given, no_socket)
    assert address == read
    assert why.startswith(f"reading the monitor at {read}: {given} is the default monitor name")
    assert "no such socket exists" in why and "port + 2" in why


def test_the_name_is_read_as_given_when_its_socket_exists() -> None:
    asked: list[str] = []

    def is_socket(path: str) -> bool:
        asked.append(path)
        return True

    assert monitor_address_to_read("ipc:///tmp/127.0.0.1_2345_monitor", is_socket) == (
        "ipc:///tmp/127.0.0.1_2345_monitor",
        "",
    )
    assert asked == ["/tmp/127.0.0.1_2345_monitor"]


@pytest.mark.parametrize(
    "given",
    [
        "tcp://127.0.0.1:2347",
        "ipc:///tmp/scaler_monitor",
        "ipc:///tmp/127.0.0.1_2345_monitor.sock",
        "ipc:///var/run/127.0.0.1_2345_monitor",
        "ipc:///tmp/sub/127.0.0.1_2345_monitor",
        "ipc:///tmp/127.0.0.1_abc_monitor",
        "ipc:///tmp/127.0.0.1_0_monitor",
        "ipc:///tmp/127.0.0.1_70000_monitor",
        "inproc://127.0.0.1_2345_monitor",
        "not-an-address",
    ],
)
def test_any_other_address_is_read_as_given(given: str) -> None:
    assert monitor_address_to_read(given, no_socket) == (given, "")
    assert reference_monitor_scheduler(given) is None


def test_a_name_whose_port_plus_2_is_no_port_is_refused_naming_it() -> None:
    with pytest.raises(AddressError, match="65534"):
        monitor_address_to_read("ipc:///tmp/127.0.0.1_65534_monitor", no_socket)


def test_the_name_encodes_the_schedulers_address() -> None:
    assert str(reference_monitor_scheduler("ipc:///tmp/0.0.0.0_8516_monitor")) == "tcp://127.0.0.1:8516"
    assert str(reference_monitor_scheduler("ipc:///tmp/10.1.2.3_2345_monitor")) == "tcp://10.1.2.3:2345"


def test_a_socket_file_is_told_from_a_plain_file_and_from_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("")
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:
        listening.bind(str(path))
        assert is_socket_file(str(path))
    assert not is_socket_file(str(plain)) and not is_socket_file(str(tmp_path / "missing"))
