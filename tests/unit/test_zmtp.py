"""The pure ZMTP 3.1 DEALER (scaler/protocol/zmtp.py) against the bytes of the protocol: its greeting and READY, a
peer's messages in any slicing, PING answered with PONG, and peers it must refuse (another mechanism, not ZeroMQ, a
socket type a DEALER does not talk to, an ERROR command). The same DEALER against real libzmq sockets:
tests/integration/test_zmtp_peers.py."""

from __future__ import annotations

import pytest

from scaler.protocol import zmtp


def peer_greeting(mechanism: bytes = b"NULL", major: int = 3) -> bytes:
    return b"\xff" + bytes(8) + b"\x7f" + bytes((major, 1)) + mechanism.ljust(20, b"\0") + b"\x01" + bytes(31)


def peer_ready(kind: bytes = b"ROUTER") -> bytes:
    return zmtp.command(b"READY", zmtp.properties({"Socket-Type": kind}))


def handshaken() -> zmtp.ZmtpDealer:
    dealer = zmtp.ZmtpDealer(b"Client|me")
    events, _ = dealer.receive(peer_greeting() + peer_ready())
    assert events == [zmtp.Ready({"Socket-Type": b"ROUTER"})]
    return dealer


def test_greeting_then_ready_with_the_identity() -> None:
    dealer = zmtp.ZmtpDealer(b"Client|me")
    start = dealer.start()
    assert len(start) == zmtp.GREETING_BYTES and start[:1] == b"\xff" and start[9:12] == b"\x7f\x03\x01"
    assert start[12:32].rstrip(b"\0") == b"NULL"
    events, out = dealer.receive(peer_greeting())
    assert events == []
    ready = zmtp.command(b"READY", zmtp.properties({"Socket-Type": b"DEALER", "Identity": b"Client|me"}))
    assert out == ready


def test_messages_wait_for_the_peers_ready_then_leave_in_order() -> None:
    dealer = zmtp.ZmtpDealer(b"id")
    assert dealer.send([b"one"]) == b""
    assert dealer.send([b"two", b"x" * 300]) == b""
    _, out = dealer.receive(peer_greeting())
    _events, out = dealer.receive(peer_ready())
    assert dealer.is_ready
    assert out == b"\x00\x03one" + b"\x01\x03two" + b"\x02" + (300).to_bytes(8, "big") + b"x" * 300


def test_a_peers_messages_in_any_slicing() -> None:
    dealer = handshaken()
    stream = zmtp.frame(b"a", 1) + zmtp.frame(b"b" * 1000, 0) + zmtp.frame(b"", 0)
    events: list[zmtp.ZmtpEvent] = []
    for index in range(len(stream)):  # one byte at a time
        got, _ = dealer.receive(stream[index : index + 1])
        events += got
    assert events == [zmtp.MessageReceived([b"a", b"b" * 1000]), zmtp.MessageReceived([b""])]


def test_a_ping_is_answered_with_pong_and_its_context() -> None:
    dealer = handshaken()
    events, out = dealer.receive(zmtp.command(b"PING", b"\x00\x64ctx"))
    assert events == [] and out == zmtp.command(b"PONG", b"ctx")


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "does not speak ZeroMQ"),
        (peer_greeting(b"CURVE"), "secured with CURVE: give this client its keys"),
        (peer_greeting(major=2), "ZMTP 2"),
        (peer_greeting() + peer_ready(b"PUB"), "PUB socket, not a server"),
        (peer_greeting() + zmtp.command(b"ERROR", b"\x0cbad identity"), "refused the connection: bad identity"),
        (peer_greeting() + zmtp.frame(b"early", 0), "before its READY"),
    ],
)
def test_a_peer_that_cannot_be_talked_to_is_refused_saying_why(data: bytes, says: str) -> None:
    dealer = zmtp.ZmtpDealer(b"id", "tcp://127.0.0.1:9")
    events, _ = dealer.receive(data)
    assert len(events) >= 1 and isinstance(events[-1], zmtp.ConnectionEnded) and says in events[-1].reason
    assert "tcp://127.0.0.1:9" in events[-1].reason
    assert dealer.receive(zmtp.frame(b"more", 0)) == ([], b"")
    with pytest.raises(zmtp.ZmtpError):
        dealer.send([b"after"])
