"""ZeroMQ's wire protocol (ZMTP 3.0, NULL security) as a DEALER on asyncio, for thousands of fake peers in one process.

A real pyzmq DEALER per fake worker would cost a ZeroMQ socket, its mailbox and a poll of every socket per read;
10,000 of them are more than one process can drive. This speaks the protocol itself on plain asyncio connections: the
greeting, the READY command naming the socket type and the routing identity the scheduler's ROUTER knows the peer by,
then multipart messages as length-prefixed frames (rfc.zeromq.org, spec 23). PING commands are answered with PONG;
other commands are ignored. The scheduler sees an ordinary DEALER with that identity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: signature, version 3.0, mechanism NULL, not a server, filler
GREETING = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + bytes(31)
_MORE, _LONG, _COMMAND = 1, 2, 4


def frame(data: bytes, more: bool = False, command: bool = False) -> bytes:
    flags = (_MORE if more else 0) | (_COMMAND if command else 0)
    if len(data) < 256:
        return bytes((flags, len(data))) + data
    return bytes((flags | _LONG,)) + len(data).to_bytes(8, "big") + data


def _command(name: bytes, body: bytes) -> bytes:
    return frame(bytes((len(name),)) + name + body, command=True)


def _property(name: bytes, value: bytes) -> bytes:
    return bytes((len(name),)) + name + len(value).to_bytes(4, "big") + value


def ready(identity: bytes) -> bytes:
    return _command(b"READY", _property(b"Socket-Type", b"DEALER") + _property(b"Identity", identity))


def message(parts: list[bytes]) -> bytes:
    """One multipart message as its frames on the wire."""
    last = len(parts) - 1
    return b"".join(frame(part, more=index < last) for index, part in enumerate(parts))


class Dealer(asyncio.Protocol):
    """One connection to a ROUTER. `on_message(parts)` for each message; `on_ready()` once the handshake is done;
    `on_lost()` when the connection closes."""

    def __init__(
        self,
        identity: bytes,
        on_message: Callable[[list[bytes]], None],
        on_ready: Callable[[], None] = lambda: None,
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        self.identity = identity
        self._on_message = on_message
        self._on_ready = on_ready
        self._on_lost = on_lost
        self._buffer = bytearray()
        self._greeted = False
        self._parts: list[bytes] = []
        self.transport: asyncio.Transport | None = None
        self.is_ready = False
        #: what was sent before the peer's READY: a message that reaches libzmq before its own READY has left is taken
        #: for a second handshake command, and the connection is refused (ZMTP_UNEXPECTED_COMMAND)
        self._early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(GREETING + ready(self.identity))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.is_ready = False
        self._on_lost()

    def send(self, parts: list[bytes]) -> None:
        if not self.is_ready:
            self._early.append(message(parts))
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.write(message(parts))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        at = 0
        if not self._greeted:
            if len(buffer) < 64:
                return
            if buffer[0] != 0xFF or buffer[9] != 0x7F or buffer[10] < 3:
                raise ConnectionError("the peer does not speak ZMTP 3")
            self._greeted, at = True, 64
        end = len(buffer)
        while end - at >= 2:
            flags = buffer[at]
            if flags & _LONG:
                if end - at < 9:
                    break
                size, start = int.from_bytes(buffer[at + 1 : at + 9], "big"), at + 9
            else:
                size, start = buffer[at + 1], at + 2
            if end - start < size:
                break
            body = bytes(buffer[start : start + size])
            at = start + size
            if flags & _COMMAND:
                self._on_command(body)
                continue
            self._parts.append(body)
            if not flags & _MORE:
                parts, self._parts = self._parts, []
                self._on_message(parts)
        del buffer[:at]

    def _on_command(self, body: bytes) -> None:
        name = body[1 : 1 + body[0]]
        if name == b"READY":
            self.is_ready = True
            if self._early and self.transport is not None:
                self.transport.write(b"".join(self._early))
            self._early = []
            self._on_ready()
        elif name == b"PING" and self.transport is not None:
            context = body[1 + body[0] + 2 :]
            self.transport.write(_command(b"PONG", context))
        elif name == b"ERROR":
            raise ConnectionError(f"the peer refused the connection: {body[1 + body[0] + 1 :]!r}")
