"""`scaler_worker_manager baremetal_native ADDR --mode fixed -n N`: a fixed pool, as the issue writes it
(without --worker-manager-id: the manager is then `baremetal_native@<host>`)."""

from __future__ import annotations

import math
import signal
import socket

import pytest

from scaler import Client
from tests.integration.conftest import Launcher, wait_for_workers

pytestmark = pytest.mark.integration


@pytest.mark.timeout(90)
def test_a_fixed_native_pool_without_a_manager_id_serves_tasks_and_stops(launcher: Launcher) -> None:
    addresses, _, _ = launcher.stack(workers=0)
    command = ("baremetal_native", addresses.scheduler, "--mode", "fixed", "-n", "2")
    pool = launcher.start("scaler_worker_manager", *command)
    snapshot = wait_for_workers(addresses.monitor, 2)
    assert {worker.manager_id for worker in snapshot.workers} == {f"baremetal_native@{socket.gethostname()}"}
    with Client(address=addresses.scheduler) as client:
        assert sum(client.map(math.sqrt, range(100))) == pytest.approx(661.46, abs=0.01)
    pool.popen.send_signal(signal.SIGTERM)
    assert pool.wait_exit() == 0
