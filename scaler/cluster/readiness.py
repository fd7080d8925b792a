"""Waiting until a freshly started scheduler answers a hello (object storage: `scaler.object_storage.readiness`)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from scaler.io.child_processes import describe_exit
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.relay import refusal
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import new_client_id

#: The probe tries a refused connection again at most this long after the last try (ZeroMQ's default backoff, doubling
#: up to a second, saw a scheduler that had just bound up to a second late: the launcher's stack was ready that late).
PROBE_RECONNECT_MAX_SECONDS = 0.05


def _check_alive(children: Sequence[Any], what: str) -> None:
    for child in children:
        if child.poll() is not None:
            raise RuntimeError(f"{what} (pid {child.pid}) exited during start-up: {describe_exit(child.returncode)}")


def wait_for_scheduler(
    address: str,
    timeout_seconds: float,
    children: Sequence[Any] = (),
    security: TransportSecurity | None = None,
    between_tries: Callable[[], None] | None = None,
) -> None:
    """Block until the scheduler at `address` answers a hello, or raise RuntimeError (TunnelError for a tunnel
    address that cannot be reached for good: a certificate that does not verify, a proxy's refusal).
    `between_tries` is called at least every 50 ms: what it raises ends the wait (the launcher's stop signal)."""
    sockets = SocketFactory(security=security, reconnect_max_seconds=PROBE_RECONNECT_MAX_SECONDS)
    probe = sockets.dealer(address, identity=new_client_id("probe"))
    info = m.ClientInfo("readiness-probe")
    hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)
    deadline = time.monotonic() + timeout_seconds
    try:
        probe.send(codec.encode(hello))
        while time.monotonic() < deadline:
            if between_tries is not None:
                between_tries()
            _check_alive(children, "a cluster process")
            refused = refusal(address)
            if refused is not None:  # a tunnel's certificate or proxy: waiting longer does not mend it
                raise TunnelError(refused)
            if probe.poll(50):
                for part in codec.split(probe.recv()):  # one message, or a batch of them joined in one part
                    reply = codec.decode(part)
                    if isinstance(reply, m.HelloReply):
                        probe.send(codec.encode(m.ClientDisconnect()))
                        if not reply.accepted:
                            raise RuntimeError(f"the scheduler at {address} refused us: {reply.reason}")
                        return
        raise RuntimeError(f"the scheduler at {address} did not answer within {timeout_seconds:g} s")
    finally:
        probe.close(linger=100)
        sockets.close()
