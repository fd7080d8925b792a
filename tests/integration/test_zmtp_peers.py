"""The pure ZMTP DEALER (scaler/protocol/zmtp.py) on a plain TCP socket against real libzmq sockets: a ROUTER knows
it by its identity both ways, its heartbeat PINGs are answered so that it keeps the connection past its heartbeat
timeout (checked by hand: with no PONG the ROUTER drops it), and a CURVE server's refusal (it closes the connection
once it read the NULL mechanism) is told as one. With keys, the pure CurveZMQ client (zmtp_curve.py, curve_box.py)
against libzmq's CURVE server: the handshake, boxes both ways, PINGs inside them, and a wrong server key told as one.
What the browser client's links rely on."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest
import zmq

from scaler.protocol import zmtp
from scaler.protocol.curve_box import z85_decode
from scaler.protocol.zmtp_curve import CurveKeys


class RawDealer:
    """A ZmtpDealer over a blocking TCP socket."""

    def __init__(self, port: int, identity: bytes, keys: CurveKeys | None = None) -> None:
        self.zmtp = zmtp.ZmtpDealer(identity, f"tcp://127.0.0.1:{port}", keys, os.urandom)
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.socket.sendall(self.zmtp.start())

    def events(self, until: type | None, timeout_seconds: float = 10.0) -> list[zmtp.ZmtpEvent]:
        """Read until an event of type `until` (None: for `timeout_seconds`), answering what the core answers; a
        closed connection ends the reading with a Refused event of `closed()`."""
        deadline = time.monotonic() + timeout_seconds
        seen: list[zmtp.ZmtpEvent] = []
        while until is None or not any(isinstance(event, until) for event in seen):
            left = deadline - time.monotonic()
            if left <= 0:
                assert until is None, f"no {until.__name__} in {timeout_seconds} s: {seen}"
                return seen
            self.socket.settimeout(left)
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return [*seen, zmtp.ConnectionEnded(self.zmtp.closed())]
            events, out = self.zmtp.receive(data)
            if out:
                self.socket.sendall(out)
            seen += events
        return seen

    def send(self, frames: list[bytes]) -> None:
        data = self.zmtp.send(frames)
        if data:
            self.socket.sendall(data)


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield context
    context.destroy(linger=0)


def bound_router(context: zmq.Context[zmq.Socket[bytes]], sockets: list[zmq.Socket[bytes]]) -> zmq.Socket[bytes]:
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    sockets.append(router)
    return router


@pytest.fixture
def sockets() -> Iterator[list[zmq.Socket[bytes]]]:
    made: list[zmq.Socket[bytes]] = []
    yield made
    for sock in made:
        sock.close()


@pytest.fixture
def dealers() -> Iterator[list[RawDealer]]:
    made: list[RawDealer] = []
    yield made
    for dealer in made:
        dealer.socket.close()


@pytest.mark.timeout(60)
def test_a_router_knows_the_dealer_by_its_identity_and_keeps_it_past_its_heartbeat_timeout(
    context: zmq.Context[zmq.Socket[bytes]], dealers: list[RawDealer], sockets: list[zmq.Socket[bytes]]
) -> None:
    router = bound_router(context, sockets)
    router.setsockopt(zmq.HEARTBEAT_IVL, 100)
    router.setsockopt(zmq.HEARTBEAT_TIMEOUT, 400)
    router.setsockopt(zmq.RCVTIMEO, 10_000)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = RawDealer(port, b"Client|browser")
    dealers.append(dealer)
    dealer.send([b"hello", b"x" * 1000])  # before the handshake: waits for READY
    dealer.events(zmtp.Ready)
    assert router.recv_multipart() == [b"Client|browser", b"hello", b"x" * 1000]
    quiet = dealer.events(None, timeout_seconds=3.0)  # past the 0.4 s heartbeat timeout: its PINGs are answered
    assert not any(isinstance(event, zmtp.ConnectionEnded) for event in quiet), quiet
    router.send_multipart([b"Client|browser", b"answer", b"y" * 300])
    received = [event for event in dealer.events(zmtp.MessageReceived) if isinstance(event, zmtp.MessageReceived)]
    assert received[0].frames == [b"answer", b"y" * 300]


@pytest.mark.timeout(60)
def test_a_curve_servers_refusal_is_told_as_one(
    context: zmq.Context[zmq.Socket[bytes]], dealers: list[RawDealer], sockets: list[zmq.Socket[bytes]]
) -> None:
    _public, secret = zmq.curve_keypair()
    router = bound_router(context, sockets)
    router.curve_server = True
    router.curve_secretkey = secret
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = RawDealer(port, b"Client|browser")
    dealers.append(dealer)
    refused = dealer.events(zmtp.ConnectionEnded)[-1]
    assert isinstance(refused, zmtp.ConnectionEnded) and "secured with keys (CURVE)" in refused.reason


def curve_pairs() -> tuple[CurveKeys, bytes]:
    """A client's keys for a server, and the server's secret key (as libzmq takes it: Z85)."""
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    keys = CurveKeys(z85_decode(server_public.decode()), z85_decode(client_public.decode()),
                     z85_decode(client_secret.decode()))  # fmt: skip
    return keys, server_secret


@pytest.mark.timeout(120)
def test_curve_both_ways_and_past_the_heartbeat_timeout(
    context: zmq.Context[zmq.Socket[bytes]], dealers: list[RawDealer], sockets: list[zmq.Socket[bytes]]
) -> None:
    """The pure CurveZMQ client against libzmq's CURVE server: the handshake, messages both ways (one of several
    boxes' worth), the identity, PINGs answered inside MESSAGE boxes."""
    keys, server_secret = curve_pairs()
    router = bound_router(context, sockets)
    router.curve_server = True
    router.curve_secretkey = server_secret
    router.setsockopt(zmq.HEARTBEAT_IVL, 100)
    router.setsockopt(zmq.HEARTBEAT_TIMEOUT, 400)
    router.setsockopt(zmq.RCVTIMEO, 30_000)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = RawDealer(port, b"Client|curve", keys)
    dealers.append(dealer)
    dealer.send([b"hello", b"x" * 3000])
    dealer.events(zmtp.Ready, timeout_seconds=30)
    assert router.recv_multipart() == [b"Client|curve", b"hello", b"x" * 3000]
    quiet = dealer.events(None, timeout_seconds=2.0)
    assert not any(isinstance(event, zmtp.ConnectionEnded) for event in quiet), quiet
    router.send_multipart([b"Client|curve", b"answer", b"y" * 300])
    received = [event for event in dealer.events(zmtp.MessageReceived, 30) if isinstance(event, zmtp.MessageReceived)]
    assert received[0].frames == [b"answer", b"y" * 300]


@pytest.mark.timeout(60)
def test_a_wrong_server_key_is_told_as_one(
    context: zmq.Context[zmq.Socket[bytes]], dealers: list[RawDealer], sockets: list[zmq.Socket[bytes]]
) -> None:
    keys, _ = curve_pairs()
    _, other_secret = zmq.curve_keypair()
    router = bound_router(context, sockets)
    router.curve_server = True
    router.curve_secretkey = other_secret
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = RawDealer(port, b"Client|curve", keys)
    dealers.append(dealer)
    refused = dealer.events(zmtp.ConnectionEnded, timeout_seconds=30)[-1]
    assert isinstance(refused, zmtp.ConnectionEnded) and "CURVE handshake" in refused.reason, refused
