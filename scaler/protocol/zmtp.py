"""ZeroMQ's wire protocol (ZMTP 3.1, rfc.zeromq.org/spec/37) for one connection of a DEALER socket, NULL or CURVE (the
mechanisms: zmtp_curve.py), as pure bytes in and out: what pyzmq's DEALER does on a `tcp://` connection, for a client
that has no libzmq (Pyodide in a browser, over a WebSocket that carries the same byte stream).

The shell brings the bytes it read (`receive`) and writes what comes back; `send` frames a message (queued until the
handshake is done, as libzmq queues). Events out: `Ready` (the peer's READY, its properties), `MessageReceived` (a
message's frames), `ConnectionEnded` (the peer's ERROR command, or bytes that are not ZMTP 3: the connection is over,
the text says why; when the byte stream closes, `closed()` says why from how far the handshake got). A peer's PING is
answered with PONG here; nothing else of the protocol reaches the shell.

Rules:
1. The greeting goes first, whole (64 bytes: signature, version 3.1, the mechanism, as-server 0); the peer's must
   have the signature, a major version of 3 or more and the same mechanism (another is refused naming it).
2. After the peer's greeting, the mechanism's handshake: NULL's READY, or CURVE's HELLO, INITIATE, with Socket-Type
   DEALER and the Identity (the routing id a ROUTER knows this connection by); the peer's READY must name a type a
   DEALER talks to (ROUTER, DEALER, REP). An ERROR command at any time refuses the connection.
3. Messages sent before the peer's READY wait, in order; after it they leave at once.
4. Once refused, the connection stays refused: nothing more is read, `send` raises ZmtpError.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scaler.protocol.zmtp_curve import (
    PURE_BOXES,
    Boxes,
    CurveClientMechanism,
    CurveKeys,
    Mechanism,
    MechanismError,
    NullMechanism,
    command_body,
)

GREETING_BYTES = 64
_SIGNATURE_END = 0x7F
_MORE, _LONG, _COMMAND = 1, 2, 4
_PEERS_OF_DEALER = (b"ROUTER", b"DEALER", b"REP")
_LONG_SIZE = struct.Struct(">Q")
_PROPERTY_SIZE = struct.Struct(">I")
#: The largest frame read: a frame claiming more is refused (a peer that is not ZMTP, or hostile).
MAX_FRAME_BYTES = 1 << 31


class ZmtpError(Exception):
    """The connection cannot be used: the peer refused it or does not speak ZMTP 3."""


@dataclass(frozen=True)
class Ready:
    """The handshake is done: the peer's READY properties (Socket-Type, ...)."""

    properties: dict[str, bytes]


@dataclass(frozen=True)
class MessageReceived:
    frames: list[bytes]


@dataclass(frozen=True)
class ConnectionEnded:
    """The connection is over: why, in a sentence."""

    reason: str


ZmtpEvent = Ready | MessageReceived | ConnectionEnded


def greeting(mechanism: bytes = b"NULL") -> bytes:
    return b"\xff" + bytes(8) + b"\x7f" + b"\x03\x01" + mechanism.ljust(20, b"\0") + b"\0" + bytes(31)


def frame(body: bytes, flags: int) -> bytes:
    """One frame: its flags, its size (one byte, or eight with the LONG flag) and its body."""
    if len(body) > 255:
        return bytes((flags | _LONG,)) + _LONG_SIZE.pack(len(body)) + body
    return bytes((flags, len(body))) + body


def command(name: bytes, data: bytes = b"") -> bytes:
    return frame(command_body(name, data), _COMMAND)


def properties(values: dict[str, bytes]) -> bytes:
    return b"".join(bytes((len(key),)) + key.encode() + _PROPERTY_SIZE.pack(len(v)) + v for key, v in values.items())


def parse_properties(data: bytes) -> dict[str, bytes]:
    values, at = {}, 0
    while at < len(data):
        size = data[at]
        name = data[at + 1 : at + 1 + size].decode("ascii", "replace")
        at += 1 + size
        if at + 4 > len(data):
            raise ZmtpError("a READY command whose properties are cut short")
        length = _PROPERTY_SIZE.unpack_from(data, at)[0]
        values[name] = data[at + 4 : at + 4 + length]
        at += 4 + length
    return values


class ZmtpDealer:
    """One connection of a DEALER (see the module's rules); NULL, or CURVE with `keys` (`zmtp_curve.py`)."""

    def __init__(
        self, identity: bytes, peer: str = "the peer", keys: CurveKeys | None = None,
        random_bytes: Callable[[int], bytes] | None = None, boxes: Boxes = PURE_BOXES,
    ) -> None:  # fmt: skip
        """`peer`: how errors name the other side (its address). With `keys`, `random_bytes(n)` gives n random
        bytes (the shell's os.urandom) and `boxes` seals and opens CURVE's boxes."""
        own = properties({"Socket-Type": b"DEALER", "Identity": identity})
        if keys is None:
            self._mechanism: Mechanism = NullMechanism(own)
        else:
            if random_bytes is None:
                raise ValueError("a CURVE connection needs random bytes")
            self._mechanism = CurveClientMechanism(keys, own, random_bytes, boxes)
        self._peer = peer
        self._buffer = bytearray()
        self._greeted = False  #: the peer's greeting was read
        self._ready = False  #: the peer's READY was read
        self._refused: str | None = None
        self._waiting: list[Sequence[bytes]] = []  #: messages sent before READY
        self._parts: list[bytes] = []  #: the frames of the message being read

    @property
    def is_ready(self) -> bool:
        return self._ready

    def start(self) -> bytes:
        """What goes first on a new connection: the greeting."""
        return greeting(self._mechanism.name)

    def send(self, frames: Sequence[bytes]) -> bytes:
        """The bytes of a message (b"" while the handshake is under way: it leaves with READY's answer)."""
        if self._refused is not None:
            raise ZmtpError(self._refused)
        if not self._ready:
            self._waiting.append(frames)
            return b""
        return self._message(frames)

    def _message(self, frames: Sequence[bytes]) -> bytes:
        last = len(frames) - 1
        return b"".join(self._frame(bytes(part), _MORE if index < last else 0) for index, part in enumerate(frames))

    def _frame(self, body: bytes, flags: int) -> bytes:
        """A frame after the handshake, as the mechanism seals it (`flags`: MORE, COMMAND)."""
        sealed, sealed_flags = self._mechanism.seal(body, bool(flags & _MORE), bool(flags & _COMMAND))
        return frame(sealed, sealed_flags)

    def receive(self, data: bytes) -> tuple[list[ZmtpEvent], bytes]:
        """The events the bytes read complete, and the bytes to write in answer."""
        if self._refused is not None:
            return [], b""
        self._buffer += data
        events: list[ZmtpEvent] = []
        out: list[bytes] = []
        try:
            if not self._greeted and not self._read_greeting(out):
                return events, b"".join(out)
            while self._read_frame(events, out):
                pass
        except (ZmtpError, MechanismError) as error:
            self._refused = f"{self._peer}: {error}" if isinstance(error, MechanismError) else str(error)
            events.append(ConnectionEnded(self._refused))
        return events, b"".join(out)

    def closed(self) -> str:
        """Why the connection is over, when the byte stream closed: what the stage it closed at says."""
        if self._refused is not None:
            return self._refused
        if self._ready:
            return f"{self._peer} closed the connection"
        if self._mechanism.name == b"CURVE":
            return (
                f"{self._peer} closed the connection during the CURVE handshake: does it know this client's key "
                "(authorised), and is the server key its own?"
            )
        # libzmq reads a client's mechanism and closes on a mismatch, with no word (its greeting may not even arrive)
        return (
            f"{self._peer} closed the connection during the ZeroMQ handshake: a server secured with keys (CURVE) does "
            "that to a client without them; give this client its keys, or connect to an address bound without keys"
        )

    def _read_greeting(self, out: list[bytes]) -> bool:
        buffer = self._buffer
        if buffer[:1] and (buffer[0] != 0xFF or (len(buffer) >= 10 and buffer[9] != _SIGNATURE_END)):
            raise ZmtpError(f"{self._peer} does not speak ZeroMQ (its first bytes: {bytes(buffer[:16])!r})")
        if len(buffer) >= 11 and buffer[10] < 3:
            raise ZmtpError(f"{self._peer} speaks ZMTP {buffer[10]}, an older ZeroMQ than 4 (ZMTP 3 is needed)")
        if len(buffer) < GREETING_BYTES:
            return False
        mechanism = bytes(buffer[12:32]).rstrip(b"\0")
        if mechanism != self._mechanism.name:
            theirs = mechanism.decode("ascii", "replace")
            if self._mechanism.name == b"NULL":
                raise ZmtpError(f"{self._peer} is secured with {theirs}: give this client its keys")
            raise ZmtpError(f"{self._peer} is not secured ({theirs}): connect without keys")
        del buffer[:GREETING_BYTES]
        self._greeted = True
        out.extend(frame(body, _COMMAND) for body in self._mechanism.hello())
        return True

    def _read_frame(self, events: list[ZmtpEvent], out: list[bytes]) -> bool:
        buffer = self._buffer
        if len(buffer) < 2:
            return False
        flags = buffer[0]
        if flags & ~(_MORE | _LONG | _COMMAND):
            raise ZmtpError(f"{self._peer} sent a frame with unknown flags {flags:#x}")
        head = 9 if flags & _LONG else 2
        if len(buffer) < head:
            return False
        size = _LONG_SIZE.unpack_from(buffer, 1)[0] if flags & _LONG else buffer[1]
        if size > MAX_FRAME_BYTES:
            raise ZmtpError(f"{self._peer} sent a frame of {size} bytes")
        if len(buffer) < head + size:
            return False
        body = bytes(buffer[head : head + size])
        del buffer[: head + size]
        if not self._ready:
            if not flags & _COMMAND:
                raise ZmtpError(f"{self._peer} sent a message before its READY")
            name, data = _command_parts(body)
            if name == b"ERROR":
                raise ZmtpError(f"{self._peer} refused the connection: {_error_reason(data)}")
            self._handshake(name, data, events, out)
            return True
        body, more, is_command = self._mechanism.open(body, flags)
        if not is_command:
            self._part(body, more, events)
            return True
        name, data = _command_parts(body)
        if name == b"ERROR":
            raise ZmtpError(f"{self._peer} refused the connection: {_error_reason(data)}")
        if name == b"PING":
            out.append(self._frame(command_body(b"PONG", data[2:]), _COMMAND))  # the ping's context after its TTL
        # PONG and other commands: nothing to do
        return True

    def _handshake(self, name: bytes, data: bytes, events: list[ZmtpEvent], out: list[bytes]) -> None:
        answers, peer_properties = self._mechanism.on_command(name, data)
        out.extend(frame(body, _COMMAND) for body in answers)
        if peer_properties is None:
            return
        peer = parse_properties(peer_properties)
        kind = peer.get("Socket-Type", b"")
        if kind not in _PEERS_OF_DEALER:
            raise ZmtpError(f"{self._peer} is a ZeroMQ {kind.decode('ascii', 'replace')} socket, not a server")
        self._ready = True
        events.append(Ready(peer))
        out.extend(self._message(frames) for frames in self._waiting)
        self._waiting = []

    def _part(self, body: bytes, more: bool, events: list[ZmtpEvent]) -> None:
        self._parts.append(body)
        if not more:
            events.append(MessageReceived(self._parts))
            self._parts = []


def _command_parts(body: bytes) -> tuple[bytes, bytes]:
    """A command's name and data."""
    name = body[1 : 1 + body[0]] if body else b""
    return name, body[1 + len(name) :]


def _error_reason(data: bytes) -> str:
    return (data[1 : 1 + data[0]].decode("utf-8", "replace") if data else "") or "no reason given"
