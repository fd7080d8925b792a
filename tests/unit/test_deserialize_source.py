"""A value read from an object as its pieces come (`serializer.deserialize_source`, the result reader's way off the
storage's host, `ObjectStorageConnection.read_in_parts`) is the value `deserialize_frames` gives from the whole
frames: a large `bytes` object (built in place by io.BufferedReader), pickle protocol 5 out-of-band buffers (as a
numpy array's), one pickle cut into pieces, a custom serializer's one frame; whatever sizes the source hands out. And
the service marks a getInParts' answer `in_parts` (the server shell then sends it in messages of its own).

Checked by hand to fail with the mechanism off: with `_get` ignoring `in_parts`, the service test finds an answer
not marked; with the raw-bytes branch returning a bytearray (`_read_exactly`), the type check fails."""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from typing import Any

import pytest

from scaler.object_storage.service import StorageService
from scaler.payload.serializer import (
    DefaultSerializer,
    Serializer,
    deserialize_frames,
    deserialize_source,
    serialize_to_frames,
)
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    GetInParts,
    Put,
    StorageHello,
    StorageRequest,
    StorageStatus,
    wire_pieces,
)


class Pieces:
    """A FrameSource handing out the pieces of `frames`, at most `step` bytes per read; counts the reads."""

    def __init__(self, frames: Sequence[Any], step: int = WIRE_PIECE_BYTES) -> None:
        self.frame_bytes = tuple(len(memoryview(frame).cast("B")) for frame in frames)
        self._pieces = [memoryview(piece).cast("B") for piece in wire_pieces(frames)]
        self._step = step
        self.reads = 0

    def readinto(self, view: memoryview) -> int:
        self.reads += 1
        while self._pieces and not len(self._pieces[0]):
            self._pieces.pop(0)
        if not self._pieces:
            return 0
        count = min(len(view), len(self._pieces[0]), self._step)
        view[:count] = self._pieces[0][:count]
        self._pieces[0] = self._pieces[0][count:]
        return count


class Reversed(Serializer):
    @staticmethod
    def serialize(obj: Any) -> bytes:
        return pickle.dumps(obj)[::-1]

    @staticmethod
    def deserialize(payload: bytes) -> Any:
        return pickle.loads(bytes(payload)[::-1])


class Blob:
    """A value pickled with its buffer out of band, as a numpy array is."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: Any) -> Any:
        return Blob, (pickle.PickleBuffer(self.data),)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Blob) and bytes(self.data) == bytes(other.data)


VALUES = {
    "large bytes": os.urandom(3 * WIRE_PIECE_BYTES + 17),
    "out-of-band buffers": [Blob(os.urandom(2 * WIRE_PIECE_BYTES + 3)), Blob(os.urandom(5000))],
    "one pickle": [os.urandom(1000).hex() for _ in range(3000)],
    "small": {"a": 1},
}


@pytest.mark.parametrize("name", sorted(VALUES))
@pytest.mark.parametrize("step", [WIRE_PIECE_BYTES, 4099])
def test_a_value_read_as_it_comes_is_the_value_of_its_frames(name: str, step: int) -> None:
    serializer = DefaultSerializer()
    value = VALUES[name]
    frames = serialize_to_frames(serializer, value)
    if name == "out-of-band buffers":
        assert len(frames) == 4, "a marker, the stream and its two buffers"
    got = deserialize_source(serializer, Pieces(frames, step))
    expected = deserialize_frames(serializer, [memoryview(frame).cast("B") for frame in frames])
    assert type(got) is type(value) is type(expected)
    assert got == value


def test_a_large_bytes_object_is_filled_piece_by_piece_as_the_pieces_come() -> None:
    value = VALUES["large bytes"]
    source = Pieces(serialize_to_frames(DefaultSerializer(), value))
    got = deserialize_source(DefaultSerializer(), source)
    assert type(got) is bytes and got == value
    assert source.reads >= 4, "each piece read into the value as it is handed out"


def test_a_custom_serializers_frame_is_read_whole() -> None:
    frames = [Reversed.serialize(list(range(300_000)))]
    assert deserialize_source(Reversed(), Pieces(frames, 7777)) == list(range(300_000))


def test_an_object_that_ends_early_is_an_error() -> None:
    frames = serialize_to_frames(DefaultSerializer(), VALUES["large bytes"])
    source = Pieces(frames)
    source.frame_bytes = (source.frame_bytes[0], source.frame_bytes[1] + 1)
    with pytest.raises(ValueError, match="ended after"):
        deserialize_source(DefaultSerializer(), source)


def test_the_service_marks_a_get_in_parts_answer_wherever_the_object_is() -> None:
    service = StorageService()
    owner, peer, object_id = b"Client|me", b"peer", ObjectID(b"o" * 32)
    hello = StorageRequest(1, StorageHello(PROTOCOL_VERSION, "3.11.0", "client", owner))
    assert service.handle(peer, encode_storage_request(hello), []).reply.status is StorageStatus.OK
    payload = [memoryview(os.urandom(2 * WIRE_PIECE_BYTES))]
    put = StorageRequest(2, Put(object_id, owner, len(payload[0])))
    assert service.handle(peer, encode_storage_request(put), payload).reply.status is StorageStatus.OK
    answer = service.handle(peer, encode_storage_request(StorageRequest(3, GetInParts(object_id))), [])
    assert answer is not None and answer.in_parts and answer.reply.status is StorageStatus.OK
    assert [bytes(frame) for frame in answer.payload] == [bytes(payload[0])]
    missing = service.handle(peer, encode_storage_request(StorageRequest(4, GetInParts(ObjectID(b"m" * 32)))), [])
    assert missing is not None and missing.reply.status is StorageStatus.NOT_FOUND
