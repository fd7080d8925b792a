"""Frames built to hurt the decoder: one that claims far more than it holds is refused at once (a list of 222
million empty structs in 80 bytes used to keep a server busy for minutes), and mutations of valid frames
(truncated, bit-flipped, random) either decode or raise DecodeError, never anything else."""

from __future__ import annotations

import random
import struct

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m


def amplification_frame() -> bytes:
    frame = bytearray(codec.encode(m.ManagerTarget(entries=(m.TargetEntry(capabilities=(), workers=1),))))
    frame[32:40] = struct.pack("<II", 9, 7)  # the entries: a composite list of 0 words at offset 2
    frame[56:64] = struct.pack("<IHH", 222_000_000 << 2, 0, 0)  # its tag: 222M structs of 0 data, 0 pointers
    return bytes(frame)


@pytest.mark.timeout(10)
def test_a_frame_claiming_a_huge_list_is_refused_at_once() -> None:
    with pytest.raises(codec.DecodeError, match="traversal limit"):
        codec.decode(amplification_frame())


def samples() -> list[bytes]:
    hello = m.Hello(m.PROTOCOL_VERSION, "3.11.7", 1, "host", m.ClientInfo("fuzz"))
    target = m.ManagerTarget(
        entries=(m.TargetEntry(capabilities=(("gpu", 1),), workers=3),), drain=("a", "b"), connected=("c",)
    )
    return [codec.encode(message) for message in (hello, target, m.TaskCancel((b"x" * 16,)), m.ClientDisconnect())]


@pytest.mark.timeout(60)
def test_mutated_frames_decode_or_raise_decode_error() -> None:
    chance = random.Random(20261122)
    for frame in samples():
        for _ in range(500):
            mutated = bytearray(frame)
            kind = chance.randrange(3)
            if kind == 0:
                mutated = mutated[: chance.randrange(len(mutated))]
            elif kind == 1:
                for _ in range(chance.randrange(1, 6)):
                    mutated[chance.randrange(len(mutated))] ^= 1 << chance.randrange(8)
            else:
                mutated = bytearray(chance.randbytes(chance.randrange(1, 200)))
            try:
                codec.decode(bytes(mutated))
            except codec.DecodeError:
                pass
