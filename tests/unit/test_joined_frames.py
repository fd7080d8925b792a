"""A batch of small messages for one peer travels as one ZeroMQ part, the messages back to back (Cap'n Proto's stream
framing): `zmq_parts.joined` makes the part, `codec.split` gives the messages back; a frame of one message is
itself, and a frame whose lengths do not add up is refused (DecodeError), never read past its end."""

from __future__ import annotations

import pytest

from scaler.io.zmq_parts import JOIN_LIMIT_BYTES, joined
from scaler.protocol import codec
from scaler.protocol import messages as m


def encoded(count: int) -> list[bytes]:
    return [codec.encode(m.TaskCancel((bytes([number]) * 16,))) for number in range(count)]


def test_one_message_is_its_own_frame() -> None:
    (frame,) = encoded(1)
    assert joined([frame]) == [frame]
    parts = codec.split(frame)
    assert parts == [frame] and parts[0] is frame  # no copy


def test_a_joined_batch_splits_into_its_messages_in_order() -> None:
    frames = encoded(5)
    (part,) = joined(frames)
    assert codec.split(part) == frames
    assert [codec.decode(piece) for piece in codec.split(part)] == [codec.decode(frame) for frame in frames]


def test_a_message_of_several_segments_splits_too() -> None:
    big = codec.encode(m.TaskLog(b"t" * 16, m.LogStream.STDOUT, "x" * 3_000_000))
    assert int.from_bytes(big[:4], "little") > 0  # more than one segment
    small = encoded(1)[0]
    assert codec.split(small + big + small) == [small, big, small]


def test_large_batches_and_other_parts_stay_as_they_are() -> None:
    frames = encoded(3)
    assert joined([*frames, b"x" * JOIN_LIMIT_BYTES]) == [*frames, b"x" * JOIN_LIMIT_BYTES]
    assert joined([memoryview(frames[0]), frames[1]])[0] == memoryview(frames[0])


@pytest.mark.parametrize(
    "frame",
    [
        encoded(2)[0] + encoded(1)[0][:-8],  # the last message cut short
        encoded(1)[0] + b"\0\0\0",  # bytes after the last message
        b"\xff\x7f\0\0" + b"\0" * 12,  # a message of 32,768 segments
        b"\x03\0\0\0\x01\0\0\0",  # a segment table cut short
    ],
)
def test_a_frame_whose_lengths_do_not_add_up_is_refused(frame: bytes) -> None:
    with pytest.raises(codec.DecodeError, match="not a valid protocol frame"):
        codec.split(frame)
