"""A real worker process beats at the period its scheduler gives (scaler/protocol/heartbeat_period.py, rule 3), not at
its own shorter setting: the test is the worker's scheduler, on a real socket, and counts the heartbeats it reads.

The worker is told 1 s in its HelloReply and in every echo, then 3 s in every echo; its own setting is 0.1 s. The
counts have generous bounds and no timing threshold: a worker that beats at its own period sends about ten times
as many in each window. Checked by switching the mechanism off: with `follow_given_period=False` in the worker agent
(worker/agent/core.py) the first window counts about 40 heartbeats and the test fails; with the echo's period
ignored (scheduler_link.py's HeartbeatEcho branch not calling `_given`) the second window counts about 9 and fails.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import pytest
import zmq

from scaler.io.address import free_tcp_port_block
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from tests.integration.conftest import (
    COLD_START_SECONDS,
    DEADLINE_SECONDS,
    Launcher,
    client_hello,
    dealer,
    free_addresses,
    hello_exchange,
    session_security,
)

pytestmark = pytest.mark.integration

OWN_PERIOD = "0.1"


class FakeScheduler:
    """A ROUTER at `address` that accepts every hello (the worker agent's and its processors'), echoes each heartbeat
    with the period it gives now, and counts the worker agent's heartbeats."""

    def __init__(self, address: str) -> None:
        self.context: zmq.Context[Any] = zmq.Context()
        self.router = self.context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        keys = session_security("server")  # the session's servers' keys: the worker connects with them
        self.router.curve_secretkey, self.router.curve_publickey = keys.secret, keys.public
        self.router.curve_server = True
        self.router.bind(address)
        self.period = 1.0
        self.agent: bytes | None = None
        self.heartbeats = 0

    def pump(self, seconds: float) -> None:
        """Answer what comes for `seconds`."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            if not self.router.poll(max(1, int(left * 1000))):
                continue
            identity, *frames = self.router.recv_multipart()
            for part in (part for frame in frames if frame for part in codec.split(frame)):
                self._on(identity, codec.decode(part))

    def _on(self, identity: bytes, message: m.Message) -> None:
        if isinstance(message, m.Hello):
            if isinstance(message.info, m.WorkerInfo):
                self.agent = identity
            reply = m.HelloReply(True, python_version=local_python_version(), object_storage_address="tcp://127.0.0.1:1",
                                 heartbeat_interval_seconds=self.period, worker_count=1)  # fmt: skip
            self.router.send_multipart([identity, codec.encode(reply)])
        elif isinstance(message, m.Heartbeat) and identity == self.agent:
            self.heartbeats += 1
            echo = m.HeartbeatEcho("tcp://127.0.0.1:1", 1, (), self.period)
            self.router.send_multipart([identity, codec.encode(echo)])

    def close(self) -> None:
        self.router.close(linger=0)
        self.context.term()


def _count(scheduler: FakeScheduler, seconds: float) -> int:
    before = scheduler.heartbeats
    scheduler.pump(seconds)
    return scheduler.heartbeats - before


@pytest.mark.timeout(COLD_START_SECONDS + 60)
def test_a_worker_beats_at_the_period_its_scheduler_gives(launcher: Launcher) -> None:
    address = f"tcp://127.0.0.1:{free_tcp_port_block(1)}"
    scheduler = FakeScheduler(address)
    try:
        worker = launcher.worker(address, "--heartbeat-interval-seconds", OWN_PERIOD)
        deadline = time.monotonic() + COLD_START_SECONDS
        while scheduler.heartbeats == 0 and time.monotonic() < deadline and worker.is_running():
            scheduler.pump(0.2)
        assert scheduler.heartbeats, f"no heartbeat from the worker; its log:\n{worker.log_text()[-4000:]}"
        first = _count(scheduler, 5.0)  # told 1 s: about 5 (about 50 at its own 0.1 s)
        assert 1 <= first <= 8, f"{first} heartbeats in 5 s at a given period of 1 s"
        scheduler.period = 3.0
        scheduler.pump(1.5)  # its next heartbeat's echo tells it
        second = _count(scheduler, 9.0)  # told 3 s: about 3 (about 9 at 1 s, 90 at 0.1 s)
        assert 1 <= second <= 5, f"{second} heartbeats in 9 s at a given period of 3 s"
        assert worker.is_running(), worker.log_text()[-4000:]
    finally:
        scheduler.close()


@pytest.mark.timeout(COLD_START_SECONDS + 60)
def test_a_scheduler_gives_its_workers_the_period_its_setting_and_their_count_make(launcher: Launcher) -> None:
    """`--worker-heartbeat-interval-seconds 0.001`: one worker is more than 50 per second of it, so the scheduler gives
    it the period of one worker at 50 heartbeats a second, rounded up to whole seconds (1 s), in its HelloReply; a
    client is told the setting itself. Checked: with the setting not passed to the core (`core=False` in its
    declaration), the worker is told 0 and this fails."""
    addresses = free_addresses()
    launcher.object_storage(addresses.object_storage)
    launcher.scheduler(addresses, "--worker-heartbeat-interval-seconds", "0.001")
    hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(),
                    m.WorkerInfo((), 1, "", "TEST", slots=1))  # fmt: skip
    with dealer(addresses.scheduler, identity=b"Worker|TEST|period", role="worker") as sock:
        sock.send(codec.encode(hello))
        assert sock.poll(int(DEADLINE_SECONDS * 1000)), "no HelloReply"
        replies = [codec.decode(part) for frame in sock.recv_multipart() for part in codec.split(frame)]
    reply = next(message for message in replies if isinstance(message, m.HelloReply))
    assert reply.accepted and reply.heartbeat_interval_seconds == 1.0
    assert hello_exchange(addresses.scheduler, client_hello()).heartbeat_interval_seconds == 0.001
