"""#38 finding 4: the laptop's forwarder says once that its hub stopped answering, and once that it answers again,
however often its peers connect meanwhile (it logged about 22,000 warnings in two minutes once its hub was gone).
A real forwarder process, a real listening socket handed to it, a target that refuses and then listens.

Checked by switching the mechanism off: with `RouteHealth.failed` returning its line for every failure, the first
test counts one warning per connection (200)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from scaler.cluster.forwarder import RETRY_CAP_SECONDS, RETRY_FIRST_SECONDS, RouteHealth
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import DEADLINE_SECONDS, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_route_health_says_each_change_once_and_backs_off() -> None:
    health = RouteHealth("10.0.0.1:8516")
    assert health.should_try(0.0) and health.answered(0.0) is None
    line = health.failed(0.0, "Connection refused")
    assert line is not None and "cannot reach 10.0.0.1:8516 (Connection refused)" in line
    assert not health.should_try(RETRY_FIRST_SECONDS / 2), "closed at once until the retry time"
    assert health.should_try(RETRY_FIRST_SECONDS)
    delays = []
    now = RETRY_FIRST_SECONDS
    for _ in range(8):
        assert health.failed(now, "Connection refused") is None, "said once"
        retry = next(t for t in (now + step / 100 for step in range(1, 1000)) if health.should_try(t))
        delays.append(round(retry - now, 2))
        now = retry
    assert delays[0] == RETRY_FIRST_SECONDS * 2 and delays[-1] == RETRY_CAP_SECONDS, delays
    back = health.answered(now)
    assert back is not None and "answers again" in back and health.answered(now) is None


@pytest.fixture
def forwarder() -> Iterator[tuple[int, int, subprocess.Popen[str]]]:
    """(listening port, target port, the forwarder process): nothing listens at the target yet."""
    port = free_tcp_port_block(2)
    listener = socket.create_server(("127.0.0.1", port))
    routes = f'[[{listener.fileno()}, "127.0.0.1", {port + 1}]]'
    process = subprocess.Popen(
        [sys.executable, "-m", "scaler.cluster.forwarder", routes], pass_fds=[listener.fileno()],
        stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    listener.close()
    try:
        yield port, port + 1, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_forwarder_whose_target_is_gone_says_so_once(forwarder: tuple[int, int, subprocess.Popen[str]]) -> None:
    port, target_port, process = forwarder
    for _ in range(200):  # peers connecting again and again, as ZeroMQ's do
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.settimeout(10)
            assert connection.recv(1) == b"", "closed by the forwarder"
    target = socket.create_server(("127.0.0.1", target_port))
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        joined = False
        while not joined and time.monotonic() < deadline:  # retried within the cap: joined again
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            target.settimeout(RETRY_CAP_SECONDS / 4)
            try:
                accepted, _ = target.accept()
                accepted.close()
                joined = True
            except TimeoutError:
                pass
            connection.close()
        assert joined, "the forwarder joins connections to the target once it answers"
    finally:
        target.close()
    # the target's accept returns once the forwarder's connect is done, before its thread logs that it answers again;
    # a thread reads the lines (a select on the pipe misses a line the text wrapper has already buffered)
    assert process.stderr is not None
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(process.stderr or ()), daemon=True)
    reader.start()
    wait_for(lambda: any("answers again" in line for line in said), "the forwarder to say its target answers again")
    process.terminate()
    process.wait(timeout=30)
    reader.join(timeout=30)
    process.stderr.close()
    errors = "".join(said)
    warnings = [line for line in errors.splitlines() if "WARNING" in line]
    assert len(warnings) == 2, errors[-3000:]
    assert f"cannot reach 127.0.0.1:{target_port}" in warnings[0] and "answers again" in warnings[1]
    wait_for(lambda: process.poll() is not None, "the forwarder to end")
