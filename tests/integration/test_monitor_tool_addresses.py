"""The web dashboard's commands at the monitor address of scaler 1.x's documents (seed 002: `scaler_ui
ipc:///tmp/127.0.0.1_2345_monitor --port 8081`), and at a monitor address that names no scheduler; scaler_top's are
in test_scaler_top.py (a real terminal)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest

from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import Launcher, wait_for

pytestmark = pytest.mark.integration


def fetch(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return int(answer.status), bytes(answer.read())


@pytest.mark.timeout(180)
def test_scaler_ui_at_a_1_x_default_monitor_name_serves_the_schedulers_page(launcher: Launcher) -> None:
    """No such socket exists: the dashboard reads the monitor at the scheduler's port + 2, and says so. Before, it
    died with an AddressError traceback ("has no port, so no address can be derived from it"). Checked by switching
    it off: with `monitor_address_to_read` returning the address as given, the page reads nothing and the test
    fails."""
    addresses, _scheduler, _storage = launcher.stack(workers=1)
    name = f"ipc:///tmp/127.0.0.1_{addresses.scheduler.rpartition(':')[2]}_monitor"
    assert not Path(name.removeprefix("ipc://")).exists()
    port = free_tcp_port_block(1)
    ui = launcher.start("scaler_ui", name, "--port", str(port))
    log = ui.wait_for_log("dashboard at", 60)
    assert f"reading the monitor at {addresses.monitor}: {name} is the default monitor name" in log, log
    code, page = fetch(f"http://127.0.0.1:{port}/")
    assert code == 200 and b"<html" in page.lower()

    def workers() -> int:
        return len(json.loads(fetch(f"http://127.0.0.1:{port}/state")[1]).get("workers", []))

    wait_for(lambda: workers() == 1, "the scheduler's worker on the page", 60)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["scaler_ui", "scaler_gui"])
def test_a_monitor_address_that_names_no_scheduler_is_one_line_and_exit_2(launcher: Launcher, command: str) -> None:
    """The dashboard asks the scheduler for task stories, at the monitor's port - 2 by default: an ipc monitor address
    has none. Checked by switching it off: without run_dashboard's AddressError refusal the command died with a
    traceback."""
    monitor = f"ipc:///tmp/scaler-test-{uuid.uuid4().hex[:8]}-monitor"
    port = free_tcp_port_block(1)
    service = launcher.start(command, monitor, "--gui-address", f"127.0.0.1:{port}")
    assert service.wait_exit() == 2
    log = service.log_text()
    assert "Traceback" not in log and len(log.strip().splitlines()) == 1, log
    assert f"monitor address {monitor}" in log and "--scheduler-address" in log, log
