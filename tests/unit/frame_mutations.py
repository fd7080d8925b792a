"""Frames a hand-written reader of the wire format must refuse or read as pycapnp reads them: a frame with a word or a
byte more or less, and with one bit flipped in each of its bytes (words, pointers, blobs and padding)."""

from __future__ import annotations

import random


def mutated(frame: bytes, rng: random.Random) -> list[bytes]:
    changed = [frame[:-8], frame + bytes(8), frame[:-1], frame + b"\0"]
    for at in range(len(frame)):
        flipped = bytearray(frame)
        flipped[at] ^= 1 << rng.randrange(8)
        changed.append(bytes(flipped))
    return changed
