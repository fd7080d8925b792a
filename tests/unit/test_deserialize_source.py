"""A value read from an object as its pieces come (`serializer.deserialize_source`, the result reader's way off the
storage's host, `ObjectStorageConnection.read_in_parts`) is the value `deserialize_frames` gives from the whole
frames: a large `bytes` object (built in place by io.BufferedReader), pickle protocol 5 out-of-band buffers (as a
numpy array's), one pickle cut into pieces, a custom serializer's one frame; whatever sizes the source hands out. And
the service marks a getInParts' answer `in_parts` (the server shell then sends it in messages of its own). The result
reader reads so off the storage's host, deletes a result read (one it could not deserialize too, as before), and
passes a failed read on as the storage's error, deleting nothing.

Checked by hand to fail with the mechanism off: with `_get` ignoring `in_parts`, the service test finds an answer
not marked; with the raw-bytes branch returning a bytearray (`_read_exactly`), the type check fails; with the result
reader reading with `get_frames` always, the reader tests fail on FarStorage's assertion; with a result deleted only
once deserialized, the one that cannot be is never deleted."""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Sequence
from typing import Any

import pytest

from scaler.errors import DeserializeObjectError, MissingObjects
from scaler.object_storage.service import StorageService
from scaler.payload.result_reader import ResultReader
from scaler.payload.serializer import (
    DefaultSerializer,
    Serializer,
    deserialize_frames,
    deserialize_source,
    serialize_to_frames,
)
from scaler.protocol import messages as m
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID, TaskID
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


class FarStorage:
    """A storage read in parts (as a connection off the storage's host): objects by id, deletes recorded."""

    def __init__(self) -> None:
        self.objects: dict[bytes, list[Any]] = {}
        self.deleted: list[bytes] = []
        self.reads = 0

    def maps_objects(self) -> bool:
        return False

    def read_in_parts(self, object_id: bytes, consume: Any) -> Any:
        self.reads += 1
        if object_id not in self.objects:
            raise MissingObjects(f"object {object_id.hex()} is not stored")
        return consume(Pieces(self.objects[object_id], 5000))

    def get_frames(self, object_id: bytes, pieces: bool = False) -> list[memoryview]:
        raise AssertionError("read in parts, not whole")

    def delete(self, object_ids: list[bytes]) -> None:
        self.deleted.extend(object_ids)


def _result(object_id: bytes) -> m.TaskResult:
    return m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, object_id)


def _wait_for(condition: Any) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the delete did not come"
        time.sleep(0.01)


def test_the_result_reader_reads_a_result_in_parts_off_the_storages_host_and_deletes_it() -> None:
    storage = FarStorage()
    storage.objects[b"o"] = serialize_to_frames(DefaultSerializer(), VALUES["large bytes"])
    reader = ResultReader(DefaultSerializer(), lambda: storage)
    assert reader.read(_result(b"o")) == VALUES["large bytes"] and storage.reads == 1
    _wait_for(lambda: storage.deleted == [b"o"])


def test_a_result_read_in_parts_that_cannot_be_deserialized_says_so_and_is_deleted() -> None:
    storage = FarStorage()
    storage.objects[b"o"] = [b"\x80\x05not a pickle" * 100]
    reader = ResultReader(DefaultSerializer(), lambda: storage)
    with pytest.raises(DeserializeObjectError, match="1,400 bytes"):
        reader.read(_result(b"o"))
    _wait_for(lambda: storage.deleted == [b"o"])


def test_a_result_whose_read_failed_is_not_deleted_and_the_error_is_the_storages() -> None:
    storage = FarStorage()
    reader = ResultReader(DefaultSerializer(), lambda: storage)
    with pytest.raises(MissingObjects):
        reader.read(_result(b"gone"))
    time.sleep(0.05)  # a delete would go on the reader's thread: none may come
    assert storage.deleted == []
