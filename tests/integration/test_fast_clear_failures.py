"""A user's first hour: a port in use fails at once naming the port and its owner, a client with no scheduler
says it is waiting and gives up, a scheduler says when its object storage does not answer."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from scaler import SchedulerClusterCombo
from tests.integration.conftest import Launcher, free_addresses, run_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port this test process listens on, as another program would."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def test_a_combo_on_a_port_in_use_raises_naming_the_port_and_its_owner(held_port: int) -> None:
    with pytest.raises(OSError, match=rf"port {held_port} is already in use \(pid {os.getpid()}:"):
        SchedulerClusterCombo(n_workers=1, address=f"tcp://127.0.0.1:{held_port}")


@pytest.mark.parametrize("command", ["scaler_scheduler", "scaler_object_storage_server"])
def test_a_command_on_a_port_in_use_exits_2_naming_the_port_and_its_owner(
    launcher: Launcher, held_port: int, command: str
) -> None:
    service = launcher.start(command, f"tcp://127.0.0.1:{held_port}")
    assert service.wait_exit() == 2
    log = service.log_text()
    assert f"port {held_port} is already in use (pid {os.getpid()}:" in log, log
    assert f"listening on tcp://127.0.0.1:{held_port}" not in log, "never 'listening' on a port it does not hold"


def test_a_client_with_no_scheduler_says_it_waits_then_gives_up() -> None:
    address = free_addresses().scheduler
    code = (
        "import sys\nfrom scaler import Client\n"
        "try:\n    Client(address=sys.argv[1], connect_timeout_seconds=6)\n"
        "except ConnectionError as error:\n    print('refused:', error)\n"
    )
    finished = run_script(code, address, timeout_seconds=60)
    assert f"scaler: still waiting for the scheduler at {address} (5 s)" in finished.stderr
    assert f"refused: no scheduler answered at {address} within 6 s" in finished.stdout


def test_a_scheduler_whose_object_storage_does_not_answer_says_so_at_start(launcher: Launcher) -> None:
    addresses = free_addresses()  # nothing listens at addresses.object_storage
    # the scheduler gives the storage server 10 s before it listens: on a loaded machine that plus its start-up
    # can outlast the usual 30 s probe, so wait for its log line with room to spare
    scheduler = launcher.scheduler(addresses, wait=False)
    log = scheduler.wait_for_log("scheduler listening on", timeout_seconds=60)
    assert f"the object storage server at {addresses.object_storage} did not answer" in log
    assert f"scaler_object_storage_server {addresses.object_storage}" in log
