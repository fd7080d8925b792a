"""ZMTP's security mechanisms for the pure DEALER (`zmtp.py`): NULL, and CURVE's client side (CurveZMQ,
rfc.zeromq.org/spec/26) over the pure boxes of `curve_box.py`, with the keys of scaler's CURVE (a client's pair and
the server's public key). Randomness (the short-term key pair, the vouch's nonce) comes in as `random_bytes`, so the
mechanism stays pure.

CURVE's handshake: HELLO (the client's short-term public key, a box proving it knows the server's key), WELCOME (the
server's short-term key and a cookie), INITIATE (the cookie, the client's long-term key and a vouch binding both of its
keys, the READY properties), READY (the server's properties). After it every frame travels as a MESSAGE command: an
8-byte nonce (a counter, increasing on each side) and a box of the frame's flags and body.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from scaler.protocol import curve_box

#: A ZMTP frame's flags (zmtp.py), and the flags a CURVE MESSAGE box carries of the frame inside it.
FRAME_MORE, FRAME_COMMAND = 1, 4
_BOX_MORE, _BOX_COMMAND = 1, 2
_COUNTER = struct.Struct(">Q")
_KEY_LINE = re.compile(r'(public|secret)-key\s*=\s*"([^"]{40})"')


class Boxes(Protocol):
    """Where NaCl's boxes come from: `curve_box` (pure Python) unless the shell has a faster one (a browser's
    tweetnacl: browser/js_boxes.py). Opening raises `curve_box.BoxError`."""

    def public_key(self, secret: bytes) -> bytes: ...
    def shared_key(self, their_public: bytes, our_secret: bytes) -> bytes: ...
    def secretbox(self, message: bytes, nonce: bytes, key: bytes) -> bytes: ...
    def secretbox_open(self, box: bytes, nonce: bytes, key: bytes) -> bytes: ...


class _PureBoxes:
    public_key = staticmethod(curve_box.public_key)
    shared_key = staticmethod(curve_box.shared_key)
    secretbox = staticmethod(curve_box.secretbox)
    secretbox_open = staticmethod(curve_box.secretbox_open)


PURE_BOXES: Boxes = _PureBoxes()


class MechanismError(Exception):
    """The peer's handshake cannot be followed: its text says why."""


@dataclass(frozen=True)
class CurveKeys:
    """What a CURVE client holds: its long-term pair and the server's public key (32 bytes each)."""

    server_public: bytes
    client_public: bytes
    client_secret: bytes

    @classmethod
    def from_texts(cls, client_secret_file: str, server_public_file: str) -> CurveKeys:
        """From the texts of a secret key file (`client.key_secret`) and a public one (`server.key`), as
        `scaler_keygen` writes them (or the bare 40-character Z85 keys). ValueError naming what is wrong."""
        pair = dict(_KEY_LINE.findall(client_secret_file)) or _bare(client_secret_file, "secret")
        server = dict(_KEY_LINE.findall(server_public_file)) or _bare(server_public_file, "public")
        if "secret" not in pair:
            raise ValueError("the client's key file has no secret-key line: give its secret file (client.key_secret)")
        if "public" not in server or "secret" in server:
            raise ValueError("the server's key file must be its public one (server.key)")
        secret = curve_box.z85_decode(pair["secret"])
        public = curve_box.public_key(secret)
        return cls(curve_box.z85_decode(server["public"]), public, secret)


def _bare(text: str, kind: str) -> dict[str, str]:
    """A bare Z85 key (40 characters) as the one line of its kind."""
    return {kind: text.strip()} if len(text.strip()) == 40 else {}


def command_body(name: bytes, data: bytes = b"") -> bytes:
    return bytes((len(name),)) + name + data


class NullMechanism:
    """No security: READY with the properties, frames as they are."""

    name = b"NULL"

    def __init__(self, properties: bytes) -> None:
        self._properties = properties

    def hello(self) -> list[bytes]:
        return [command_body(b"READY", self._properties)]

    def on_command(self, name: bytes, data: bytes) -> tuple[list[bytes], bytes | None]:
        """The handshake's commands out, and the peer's READY properties once it is done."""
        if name == b"READY":
            return [], data
        raise MechanismError(f"an unexpected {name.decode('ascii', 'replace')} command during the handshake")

    def seal(self, body: bytes, more: bool, is_command: bool) -> tuple[bytes, int]:
        """A frame after the handshake as it travels: its body and its ZMTP flags."""
        return body, (FRAME_MORE if more else 0) | (FRAME_COMMAND if is_command else 0)

    def open(self, body: bytes, flags: int) -> tuple[bytes, bool, bool]:
        """A frame after the handshake as it came: the frame it carries (body, more, whether a command)."""
        return body, bool(flags & FRAME_MORE), bool(flags & FRAME_COMMAND)


class CurveClientMechanism:
    """CurveZMQ's client (see the module's docstring)."""

    name = b"CURVE"

    def __init__(
        self, keys: CurveKeys, properties: bytes, random_bytes: Callable[[int], bytes], boxes: Boxes = PURE_BOXES
    ) -> None:
        self._keys = keys
        self._properties = properties
        self._random_bytes = random_bytes
        self._boxes = boxes
        self._short_secret = random_bytes(32)
        self._short_public = boxes.public_key(self._short_secret)
        self._nonce = 1  #: the next short nonce this side uses
        self._peer_nonce = 0  #: the last short nonce the server used
        self._session_key = b""  #: the box key between both short-term pairs, once WELCOME is read

    def _next_nonce(self) -> bytes:
        nonce = _COUNTER.pack(self._nonce)
        self._nonce += 1
        return nonce

    def hello(self) -> list[bytes]:
        nonce = self._next_nonce()
        key = self._boxes.shared_key(self._keys.server_public, self._short_secret)
        proof = self._boxes.secretbox(bytes(64), b"CurveZMQHELLO---" + nonce, key)
        return [command_body(b"HELLO", b"\x01\x00" + bytes(72) + self._short_public + nonce + proof)]

    def on_command(self, name: bytes, data: bytes) -> tuple[list[bytes], bytes | None]:
        if name == b"WELCOME" and not self._session_key:
            return [self._initiate(data)], None
        if name == b"READY" and self._session_key:
            nonce = data[:8]
            return [], self._opened(data[8:], b"CurveZMQREADY---" + nonce, nonce)
        raise MechanismError(f"an unexpected {name.decode('ascii', 'replace')} command during the CURVE handshake")

    def _initiate(self, data: bytes) -> bytes:
        keys = self._keys
        try:
            key = self._boxes.shared_key(keys.server_public, self._short_secret)
            welcome = self._boxes.secretbox_open(data[16:], b"WELCOME-" + data[:16], key)
        except curve_box.BoxError:
            raise MechanismError("the server's WELCOME does not open: is the server key the server's?") from None
        server_short, cookie = welcome[:32], welcome[32:128]
        self._session_key = self._boxes.shared_key(server_short, self._short_secret)
        vouch_nonce = self._random_bytes(16)
        vouching = self._boxes.shared_key(server_short, keys.client_secret)
        vouch = self._boxes.secretbox(self._short_public + keys.server_public, b"VOUCH---" + vouch_nonce, vouching)
        nonce = self._next_nonce()
        plain = keys.client_public + vouch_nonce + vouch + self._properties
        sealed = self._boxes.secretbox(plain, b"CurveZMQINITIATE" + nonce, self._session_key)
        return command_body(b"INITIATE", cookie + nonce + sealed)

    def _opened(self, sealed: bytes, nonce: bytes, short: bytes) -> bytes:
        counter = _COUNTER.unpack(short)[0] if len(short) == 8 else 0
        if counter <= self._peer_nonce:
            raise MechanismError("the server repeated a nonce")
        try:
            plain = self._boxes.secretbox_open(sealed, nonce, self._session_key)
        except curve_box.BoxError:
            raise MechanismError("a frame from the server does not open (changed on the way?)") from None
        self._peer_nonce = counter
        return plain

    def seal(self, body: bytes, more: bool, is_command: bool) -> tuple[bytes, int]:
        """A MESSAGE box in a data frame (as libzmq sends it): the flags of the frame it carries, then its body."""
        nonce = self._next_nonce()
        flags = (_BOX_MORE if more else 0) | (_BOX_COMMAND if is_command else 0)
        sealed = self._boxes.secretbox(bytes((flags,)) + body, b"CurveZMQMESSAGEC" + nonce, self._session_key)
        return command_body(b"MESSAGE", nonce + sealed), 0

    def open(self, body: bytes, flags: int) -> tuple[bytes, bool, bool]:
        if flags & FRAME_COMMAND:  # a plain command (ERROR) after the handshake
            return body, False, True
        if body[:8] != b"\x07MESSAGE":
            raise MechanismError("a frame that is not a CURVE MESSAGE after the handshake")
        data = body[8:]
        plain = self._opened(data[8:], b"CurveZMQMESSAGES" + data[:8], data[:8])
        if not plain:
            raise MechanismError("an empty CURVE MESSAGE")
        return plain[1:], bool(plain[0] & _BOX_MORE), bool(plain[0] & _BOX_COMMAND)


Mechanism = NullMechanism | CurveClientMechanism
