"""A request to object storage whose connection goes between the poll and the send (a server restarting): the
send is refused with EAGAIN and the connection polls again instead of failing the task (seen in the hour soak as
205 tasks failed with "Resource temporarily unavailable" at a storage restart)."""

from __future__ import annotations

from typing import Any

import zmq

from scaler.object_storage.connection import ObjectStorageConnection


class ConnectionGoneOnce:
    """A DEALER whose first send after a successful poll finds the connection gone."""

    def __init__(self) -> None:
        self.polls = 0
        self.sent: list[list[Any]] = []
        self.refusals = 1

    def poll(self, timeout_ms: int, flags: int) -> int:
        self.polls += 1
        return flags

    def send_multipart(self, frames: list[Any], flags: int, copy: bool) -> None:
        assert flags == zmq.NOBLOCK
        if self.refusals:
            self.refusals -= 1
            raise zmq.Again()
        self.sent.append(frames)


def test_a_send_refused_after_the_poll_polls_again_and_sends() -> None:
    connection = ObjectStorageConnection("tcp://127.0.0.1:1", "test")
    sock = ConnectionGoneOnce()
    try:
        connection._send(sock, [b"request"])  # type: ignore[arg-type]
    finally:
        connection.close()
    assert sock.sent == [[b"request"]] and sock.polls == 2
