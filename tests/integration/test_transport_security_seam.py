"""The transport security seam reaches every socket of a stack: object storage, scheduler, worker (agent and
processors), client (scheduler and object storage connections, and a client created inside a task) and the
readiness probe, each given one `TransportSecurity` at construction. The stack runs with the test CURVE
security of `tests/curve_security.py`; a socket made anywhere without it would stall a task or its data, and
peers without authorised keys get nowhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scaler import Client
from scaler.cluster.readiness import wait_for_scheduler
from tests.curve_security import CurveForTheSeam, curve_keys
from tests.integration.conftest import DEADLINE_SECONDS, ProcessWatch, free_addresses

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not __import__("zmq").has("curve"), reason="no CURVE")]

ROOT = Path(__file__).resolve().parents[2]
#: Above the 64 KiB inline limit: arguments and results of this size travel through object storage.
LARGE_BYTES = 200_000


def reversed_bytes(data: bytes) -> bytes:
    return data[::-1]


def sum_of_squares_nested(n: int) -> int:
    from scaler import Client

    with Client() as inner:  # inside a task: the scheduler's address and the worker's security
        return sum(inner.map(lambda x: x * x, range(n)))


def start(processes: ProcessWatch, log_dir: Path, role: str, keys: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(log_dir / f"{role}.log", "wb") as log:
        command = [sys.executable, "-m", "tests.integration.secured_component", role, str(keys), *args]
        popen = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    return processes.add(popen)


@pytest.mark.timeout(120)
def test_a_stack_secured_through_the_seam_runs_tasks_and_refuses_peers_without_keys(
    processes: ProcessWatch, tmp_path: Path
) -> None:
    keys, strangers = tmp_path / "authorized", tmp_path / "strangers"
    server_public, _ = curve_keys(keys, "server")
    client_security = CurveForTheSeam(curve_keys(keys, "client"), server_public)
    curve_keys(keys, "worker")
    addresses = free_addresses()
    storage = start(processes, tmp_path, "storage", keys, addresses.object_storage)
    scheduler = start(processes, tmp_path, "scheduler", keys, addresses.scheduler, addresses.object_storage)
    wait_for_scheduler(addresses.scheduler, DEADLINE_SECONDS, [storage, scheduler], security=client_security)
    start(processes, tmp_path, "worker", keys, addresses.scheduler)

    with Client(address=addresses.scheduler, security=client_security) as client:
        large = bytes(range(256)) * (LARGE_BYTES // 256)
        assert client.submit(reversed_bytes, large).result(timeout=DEADLINE_SECONDS) == large[::-1]
        assert client.submit(sum_of_squares_nested, 10).result(timeout=DEADLINE_SECONDS) == 285

    stranger_security = CurveForTheSeam(curve_keys(strangers, "client"), server_public)
    for security in (None, stranger_security):  # refused at the handshake: the connection closes at once
        with pytest.raises(ConnectionError, match=addresses.scheduler):
            Client(address=addresses.scheduler, timeout_seconds=DEADLINE_SECONDS, security=security)
    processes.remember()
