"""A request to object storage whose connection goes between the poll and the send (a server restarting): the
send is refused with EAGAIN and the link waits for the socket to take it instead of failing the task (seen in the
hour soak as 205 tasks failed with "Resource temporarily unavailable" at a storage restart; the rule is the storage
client core's rule 6, carried out by `BlockingLink`). Checked to fail by making `BlockingLink._send` report the
first EAGAIN as unreachable."""

from __future__ import annotations

from typing import Any

import zmq

from scaler.object_storage.client_core import Failed, StorageClientCore, hello_operation
from scaler.object_storage.connection import BlockingLink
from scaler.protocol.storage_messages import Info


class ConnectionGoneOnce:
    """A DEALER whose first send finds no connection (EAGAIN), then the socket becomes writable again."""

    def __init__(self, refusals: int = 1, writable: bool = True) -> None:
        self.polls = 0
        self.sent: list[list[Any]] = []
        self.refusals = refusals
        self.writable = writable

    def poll(self, timeout_ms: int, flags: int) -> int:
        self.polls += 1
        return flags if self.writable else 0

    def send_multipart(self, frames: list[Any], flags: int, copy: bool) -> None:
        assert flags == zmq.NOBLOCK
        if self.refusals:
            self.refusals -= 1
            raise zmq.Again()
        self.sent.append(frames)

    def close(self, linger: int) -> None:
        pass

    def disable_monitor(self) -> None:
        pass


class NoEvents:
    """A monitor that never reports a connection event."""

    def recv_multipart(self, flags: int) -> list[bytes]:
        raise zmq.Again()

    def close(self, linger: int) -> None:
        pass


class OneSocket:
    security = None

    def __init__(self, sock: ConnectionGoneOnce) -> None:
        self.sock = sock

    def dealer(self, address: str, identity: bytes | None = None, immediate: bool = False, events: int = 0) -> Any:
        return self.sock

    def event_monitor(self, sock: Any, events: int) -> NoEvents:
        return NoEvents()


def link_over(sock: ConnectionGoneOnce, timeout_seconds: float = 60.0) -> BlockingLink[None]:
    core: StorageClientCore[None] = StorageClientCore("tcp://127.0.0.1:1", hello_operation("test", "3.11"),
                                                      timeout_seconds)  # fmt: skip
    return BlockingLink(core, OneSocket(sock), immediate=True)  # type: ignore[arg-type]


def test_a_send_refused_after_the_poll_polls_again_and_sends() -> None:
    sock = ConnectionGoneOnce()
    link = link_over(sock)
    link.core.request(Info(), now=0.0)
    assert link.flush() == []
    assert len(sock.sent) == 2 and sock.polls == 1  # the hello (after one wait for the socket), then the request


def test_a_send_that_finds_no_connection_until_the_deadline_fails_the_request_as_unreachable() -> None:
    sock = ConnectionGoneOnce(refusals=10**6, writable=False)
    link = link_over(sock, timeout_seconds=0.05)
    ticket = link.core.request(Info(), now=0.0)
    [failed] = link.flush()
    assert isinstance(failed, Failed) and failed.ticket == ticket
    assert "is not reachable: no connection within 0.05 s" in str(failed.error)
