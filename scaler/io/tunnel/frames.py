"""WebSocket frames after the upgrade (RFC 6455, section 5), both ways: what a tunnel sends is one binary frame per
slice of ZeroMQ bytes (masked from a connecting side, as the RFC wants; never from a server), and what it reads may
be binary or continuation frames (their payloads are the bytes), pings (answered), a close (answered, then the end)
or anything else (a text frame, a frame masked the wrong way: answered with a close). Pure but for the masking keys
(`os.urandom`); wsproto does the upgrade itself (`websocket.py`), this the data path, where its per-frame cost was
most of a tunnelled round trip's."""

from __future__ import annotations

import os
import struct

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: Close codes: a normal end, a protocol error, data of a kind this side does not take (text).
CLOSE_NORMAL, CLOSE_PROTOCOL_ERROR, CLOSE_UNSUPPORTED_DATA = 1000, 1002, 1003
#: The largest frame read (a peer's slices are far smaller: a relay's reads are 256 KiB at most).
MAX_FRAME_BYTES = 64 * 1024 * 1024


def frame(opcode: int, payload: bytes | memoryview, masked: bool) -> bytes:
    """One final frame of `opcode` carrying `payload`, masked with a fresh key when `masked`."""
    length = len(payload)
    mask_bit = 0x80 if masked else 0
    if length < 126:
        head = struct.pack("!BB", 0x80 | opcode, mask_bit | length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, mask_bit | 126, length)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, mask_bit | 127, length)
    if not masked:
        return head + payload
    key = _masking_key()
    return head + key + _xor(payload, key)


#: Masking keys drawn and not used yet (the relay's thread alone takes them; a forked child draws its own).
_keys = bytearray()
if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows)
    os.register_at_fork(after_in_child=_keys.clear)


def _masking_key() -> bytes:
    """Four unpredictable bytes (RFC 6455, section 5.3), taken from the system's random source a thousand at a time."""
    if not _keys:
        _keys.extend(os.urandom(4096))
    key = bytes(_keys[-4:])
    del _keys[-4:]
    return key


def _xor(payload: bytes | memoryview, key: bytes) -> bytes:
    if not payload:
        return b""
    length = len(payload)
    mask = (key * ((length + 3) // 4))[:length]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(mask, "little")).to_bytes(length, "little")


class WebSocketFrameReader:
    """Frames read from a peer that masks (`peer_masks`: a server reading a connecting side) or does not."""

    def __init__(self, peer_masks: bool) -> None:
        self._peer_masks = peer_masks
        self._buffer = bytearray()
        self.closed = False  #: a close was read, or the peer broke the protocol

    def read(self, data: bytes) -> tuple[bytes, list[tuple[int, bytes]]]:
        """(the data frames' payloads, in order; the control replies to send: (opcode, payload))."""
        self._buffer += data
        payloads: list[bytes] = []
        replies: list[tuple[int, bytes]] = []
        while not self.closed:
            parsed = self._next()
            if parsed is None:
                break
            opcode, payload = parsed
            if opcode in (BINARY, CONTINUATION):
                payloads.append(payload)
            elif opcode == PING:
                replies.append((PONG, payload))
            elif opcode == CLOSE:
                self.closed = True
                replies.append((CLOSE, payload[:2] if len(payload) >= 2 else b""))
            elif opcode != PONG:
                self._refuse(replies, CLOSE_UNSUPPORTED_DATA if opcode == TEXT else CLOSE_PROTOCOL_ERROR)
        return b"".join(payloads), replies

    def _next(self) -> tuple[int, bytes] | None:
        buffer = self._buffer
        if len(buffer) < 2:
            return None
        first, second = buffer[0], buffer[1]
        masked, length, offset = bool(second & 0x80), second & 0x7F, 2
        if length == 126:
            if len(buffer) < 4:
                return None
            length, offset = struct.unpack_from("!H", buffer, 2)[0], 4
        elif length == 127:
            if len(buffer) < 10:
                return None
            length, offset = struct.unpack_from("!Q", buffer, 2)[0], 10
        if masked != self._peer_masks or first & 0x70 or length > MAX_FRAME_BYTES:
            self.closed = True  # masked the wrong way, an extension's bits, an absurd size: end it
            return None
        end = offset + (4 if masked else 0) + length
        if len(buffer) < end:
            return None
        if masked:
            payload = _xor(bytes(buffer[offset + 4 : end]), bytes(buffer[offset : offset + 4]))
        else:
            payload = bytes(buffer[offset:end])
        del buffer[:end]
        return first & 0x0F, payload

    def _refuse(self, replies: list[tuple[int, bytes]], code: int) -> None:
        self.closed = True
        replies.append((CLOSE, struct.pack("!H", code)))
