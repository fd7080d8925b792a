"""NaCl's `crypto_box` (X25519, then XSalsa20 and Poly1305) in pure Python: what CurveZMQ's boxes are, for the
browser client's CURVE (`zmtp.py`), where no libsodium can be loaded (Pyodide in a page). Each primitive follows its
specification (RFC 7748 for X25519, Bernstein's Salsa20 and XSalsa20 papers, RFC 8439's Poly1305), and the whole is
checked against libzmq's own CURVE (tests/integration/test_zmtp_peers.py) and against `cryptography`'s X25519.

Pure Python is slow next to libsodium (a box seals about 2 MB/s in CPython) and its integer arithmetic does not take
constant time; it is used for a client's own connections, where the keys' holder is the only one who could time it.
"""

from __future__ import annotations

import hmac
import struct

KEY_BYTES = 32
MAC_BYTES = 16
NONCE_BYTES = 24
_P = 2**255 - 19
_A24 = 121665
_MASK = 0xFFFFFFFF
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"
_WORDS = struct.Struct("<16I")
_POLY_P = (1 << 130) - 5
_POLY_CLAMP = 0x0FFFFFFC0FFFFFFC0FFFFFFC0FFFFFFF


class BoxError(ValueError):
    """A box that does not open: not sealed for these keys and this nonce, or changed on the way."""


# ---------------------------------------------------------------- X25519 (RFC 7748)


def x25519(scalar: bytes, point: bytes) -> bytes:
    """The Montgomery ladder of RFC 7748, section 5."""
    clamped = bytearray(scalar)
    clamped[0] &= 248
    clamped[31] = (clamped[31] & 127) | 64
    k = int.from_bytes(clamped, "little")
    x1 = int.from_bytes(point, "little") & ((1 << 255) - 1)
    x2, z2, x3, z3, swap = 1, 0, x1, 1, 0
    for t in range(254, -1, -1):
        bit = (k >> t) & 1
        if swap ^ bit:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = bit
        a, b = (x2 + z2) % _P, (x2 - z2) % _P
        aa, bb = a * a % _P, b * b % _P
        e = (aa - bb) % _P
        c, d = (x3 + z3) % _P, (x3 - z3) % _P
        da, cb = d * a % _P, c * b % _P
        x3, z3 = (da + cb) ** 2 % _P, x1 * (da - cb) ** 2 % _P
        x2, z2 = aa * bb % _P, e * (aa + _A24 * e) % _P
    if swap:
        x2, z2 = x3, z3
    return (x2 * pow(z2, _P - 2, _P) % _P).to_bytes(32, "little")


def public_key(secret: bytes) -> bytes:
    return x25519(secret, (9).to_bytes(32, "little"))


# ---------------------------------------------------------------- Salsa20, HSalsa20, XSalsa20


def _rounds(state: tuple[int, ...]) -> tuple[int, ...]:
    """Salsa20's 20 rounds (ten double rounds, unrolled on local names: five times the speed of a loop over
    indices)."""
    x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15 = state
    for _ in range(10):
        s = (x0 + x12) & _MASK
        x4 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x4 + x0) & _MASK
        x8 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x8 + x4) & _MASK
        x12 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x12 + x8) & _MASK
        x0 ^= ((s << 18) | (s >> 14)) & _MASK
        s = (x5 + x1) & _MASK
        x9 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x9 + x5) & _MASK
        x13 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x13 + x9) & _MASK
        x1 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x1 + x13) & _MASK
        x5 ^= ((s << 18) | (s >> 14)) & _MASK
        s = (x10 + x6) & _MASK
        x14 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x14 + x10) & _MASK
        x2 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x2 + x14) & _MASK
        x6 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x6 + x2) & _MASK
        x10 ^= ((s << 18) | (s >> 14)) & _MASK
        s = (x15 + x11) & _MASK
        x3 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x3 + x15) & _MASK
        x7 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x7 + x3) & _MASK
        x11 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x11 + x7) & _MASK
        x15 ^= ((s << 18) | (s >> 14)) & _MASK
        s = (x0 + x3) & _MASK
        x1 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x1 + x0) & _MASK
        x2 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x2 + x1) & _MASK
        x3 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x3 + x2) & _MASK
        x0 ^= ((s << 18) | (s >> 14)) & _MASK
        s = (x5 + x4) & _MASK
        x6 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x6 + x5) & _MASK
        x7 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x7 + x6) & _MASK
        x4 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x4 + x7) & _MASK
        x5 ^= ((s << 18) | (s >> 14)) & _MASK
        s = (x10 + x9) & _MASK
        x11 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x11 + x10) & _MASK
        x8 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x8 + x11) & _MASK
        x9 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x9 + x8) & _MASK
        x10 ^= ((s << 18) | (s >> 14)) & _MASK
        s = (x15 + x14) & _MASK
        x12 ^= ((s << 7) | (s >> 25)) & _MASK
        s = (x12 + x15) & _MASK
        x13 ^= ((s << 9) | (s >> 23)) & _MASK
        s = (x13 + x12) & _MASK
        x14 ^= ((s << 13) | (s >> 19)) & _MASK
        s = (x14 + x13) & _MASK
        x15 ^= ((s << 18) | (s >> 14)) & _MASK
    return (x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15)


def _state(key: bytes, middle: tuple[int, ...]) -> tuple[int, ...]:
    k = struct.unpack("<8I", key)
    return (_SIGMA[0], *k[:4], _SIGMA[1], *middle, _SIGMA[2], *k[4:], _SIGMA[3])


def hsalsa20(key: bytes, nonce16: bytes) -> bytes:
    x = _rounds(_state(key, struct.unpack("<4I", nonce16)))
    return struct.pack("<8I", x[0], x[5], x[10], x[15], x[6], x[7], x[8], x[9])


def _salsa20_stream(key: bytes, nonce8: bytes, length: int) -> bytes:
    n = struct.unpack("<2I", nonce8)
    blocks = []
    for counter in range((length + 63) // 64):
        initial = _state(key, (*n, counter & _MASK, counter >> 32))
        x = _rounds(initial)
        blocks.append(_WORDS.pack(*((a + b) & _MASK for a, b in zip(x, initial, strict=True))))
    return b"".join(blocks)[:length]


def _xor(data: bytes, stream: bytes) -> bytes:
    return (int.from_bytes(data, "little") ^ int.from_bytes(stream[: len(data)], "little")).to_bytes(
        len(data), "little"
    )


# ---------------------------------------------------------------- Poly1305, secretbox, box


def poly1305(key: bytes, message: bytes) -> bytes:
    r = int.from_bytes(key[:16], "little") & _POLY_CLAMP
    s = int.from_bytes(key[16:32], "little")
    accumulator = 0
    for at in range(0, len(message), 16):
        accumulator = (accumulator + int.from_bytes(message[at : at + 16] + b"\x01", "little")) * r % _POLY_P
    return ((accumulator + s) & ((1 << 128) - 1)).to_bytes(16, "little")


def secretbox(message: bytes, nonce: bytes, key: bytes) -> bytes:
    """XSalsa20-Poly1305: the MAC (16 bytes), then the ciphertext (NaCl's `crypto_secretbox_easy` layout)."""
    stream = _salsa20_stream(hsalsa20(key, nonce[:16]), nonce[16:], 32 + len(message))
    ciphertext = _xor(message, stream[32:])
    return poly1305(stream[:32], ciphertext) + ciphertext


def secretbox_open(box: bytes, nonce: bytes, key: bytes) -> bytes:
    if len(box) < MAC_BYTES:
        raise BoxError("a box shorter than its MAC")
    mac, ciphertext = box[:MAC_BYTES], box[MAC_BYTES:]
    stream = _salsa20_stream(hsalsa20(key, nonce[:16]), nonce[16:], 32 + len(ciphertext))
    if not hmac.compare_digest(poly1305(stream[:32], ciphertext), mac):
        raise BoxError("a box that does not open with these keys")
    return _xor(ciphertext, stream[32:])


def shared_key(their_public: bytes, our_secret: bytes) -> bytes:
    """`crypto_box_beforenm`: the key a box between the two key pairs is sealed with."""
    return hsalsa20(x25519(our_secret, their_public), bytes(16))


def box(message: bytes, nonce: bytes, their_public: bytes, our_secret: bytes) -> bytes:
    return secretbox(message, nonce, shared_key(their_public, our_secret))


def box_open(sealed: bytes, nonce: bytes, their_public: bytes, our_secret: bytes) -> bytes:
    return secretbox_open(sealed, nonce, shared_key(their_public, our_secret))


# ---------------------------------------------------------------- Z85 (ZeroMQ's key text)

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUES = {character: value for value, character in enumerate(_Z85)}


def z85_decode(text: str) -> bytes:
    """A key as ZeroMQ writes it (40 characters for 32 bytes); ValueError for text that is not Z85."""
    if len(text) % 5:
        raise ValueError(f"Z85 text of {len(text)} characters (a multiple of 5 is needed)")
    out = bytearray()
    for at in range(0, len(text), 5):
        value = 0
        for character in text[at : at + 5]:
            if character not in _Z85_VALUES:
                raise ValueError(f"{character!r} is not a Z85 character")
            value = value * 85 + _Z85_VALUES[character]
        out += value.to_bytes(4, "big")
    return bytes(out)
