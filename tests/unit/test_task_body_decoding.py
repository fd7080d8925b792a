"""A task body is decoded as a message is (`codec.decode_body`: read_multiple_bytes, without from_bytes's context
manager, about a fifth of its cost; a processor decodes one per task), and as strictly: exactly one body.

Checked by hand with the mechanism off (`decode_body` through `_decode`'s from_bytes, as before): the two-bodies test
fails (from_bytes read the first and ignored the rest). The round trip guards the values.
"""

from __future__ import annotations

import pickle

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID

BODY = m.TaskBody(
    ObjectID(b"f" * 32),
    (
        m.Argument(m.ArgumentKind.OBJECT_ID, b"o" * 32, copy_on_write=True),
        m.Argument(m.ArgumentKind.INLINE, pickle.dumps(5), keyword="seed"),
    ),
    ObjectID(b""),
    True,
    False,
    3,
    m.LogForwarding(level=20),
)


def test_a_body_round_trips() -> None:
    assert codec.decode_body(codec.encode_body(BODY)) == BODY
    assert codec.decode_body(memoryview(codec.encode_body(BODY))) == BODY


@pytest.mark.parametrize("frame", [b"", b"\x00" * 7, b"garbage!" * 3], ids=["empty", "short", "garbage"])
def test_what_is_no_body_is_refused(frame: bytes) -> None:
    with pytest.raises(codec.DecodeError, match="not a valid task body"):
        codec.decode_body(frame)


def test_a_frame_with_two_bodies_is_refused() -> None:
    encoded = codec.encode_body(BODY)
    with pytest.raises(codec.DecodeError, match="several"):
        codec.decode_body(encoded + encoded)
