"""Large payload frames cross a CURVE-secured storage connection in pieces (scaler/protocol/storage_chunks.py): libzmq
encrypts a message whole before its first byte leaves and decrypts it once its last byte has arrived, so pieces let
both overlap the transfer. A put's pieces are joined again by the server (`Put.frame_bytes`), so that what is stored
is the object's frames as put (a reader on the server's host maps them without a copy).

Checked by hand to fail with the mechanism off: with `on_the_wire` returning the payload as it is, the secured put
test finds one 3 MiB frame; with the service ignoring `frame_bytes`, the stored frames are the pieces."""

from __future__ import annotations

import os

import pytest

from scaler.object_storage.client_core import on_the_wire, payload_frames, put_operation
from scaler.object_storage.service import StorageService
from scaler.payload.serializer import DefaultSerializer, deserialize_frames, serialize_to_frames
from scaler.protocol.codec import decode_storage_request, encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    Get,
    ObjectSize,
    Put,
    StorageHello,
    StorageRequest,
    StorageStatus,
    joined_pieces,
    wire_pieces,
)

OBJECT = ObjectID(b"o" * 32)
OWNER = b"Client|me"
PEER = b"peer"


def test_wire_pieces_cuts_only_large_frames_into_views_of_them() -> None:
    small, large = b"marker", bytearray(os.urandom(2 * WIRE_PIECE_BYTES + 5))
    pieces = wire_pieces([small, large])
    assert [len(piece) for piece in pieces] == [len(small), WIRE_PIECE_BYTES, WIRE_PIECE_BYTES, 5]
    assert pieces[0] is small
    large[0] ^= 0xFF  # views, not copies
    assert pieces[1][0] == large[0]
    assert b"".join(bytes(piece) for piece in pieces[1:]) == bytes(large)


def test_joined_pieces_gives_the_frames_back_and_refuses_pieces_that_do_not_add_up() -> None:
    frames = [b"m", os.urandom(WIRE_PIECE_BYTES + 1), b"", os.urandom(10)]
    pieces = wire_pieces(frames)
    joined = joined_pieces(pieces, [len(frame) for frame in frames])
    assert joined is not None
    assert [bytes(frame) for frame in joined] == frames
    assert joined[0] is frames[0]  # a frame that came whole is kept as it is
    assert joined_pieces(pieces, [1, WIRE_PIECE_BYTES + 2, 9]) is None  # a boundary inside a piece
    assert joined_pieces(pieces, [1, WIRE_PIECE_BYTES + 1]) is None  # pieces left over
    assert joined_pieces(pieces, [1, WIRE_PIECE_BYTES + 1, 0, 10, 5]) is None  # too few bytes


def _put_request(frames: list[bytes]) -> tuple[StorageRequest, list[memoryview]]:
    payload = payload_frames(frames)
    return StorageRequest(3, put_operation(OBJECT, payload, OWNER, "name")), payload


def test_a_secured_put_goes_in_pieces_and_names_its_frames() -> None:
    frames = [b"marker", os.urandom(3 * WIRE_PIECE_BYTES)]
    request, payload = _put_request(frames)
    wired, pieces = on_the_wire(request, payload, secured=True)
    assert isinstance(wired.operation, Put)
    assert wired.operation.frame_bytes == (len(frames[0]), len(frames[1]))
    assert [len(piece) for piece in pieces] == [len(frames[0])] + [WIRE_PIECE_BYTES] * 3
    # the header survives the codec with the frames' lengths
    assert decode_storage_request(encode_storage_request(wired)) == wired


@pytest.mark.parametrize("secured", [True, False])
def test_what_gains_nothing_from_pieces_goes_as_it_is(secured: bool) -> None:
    small_put = _put_request([b"marker", os.urandom(WIRE_PIECE_BYTES)])
    assert on_the_wire(*small_put, secured=secured) == small_put
    get = StorageRequest(4, Get(OBJECT))
    assert on_the_wire(get, (), secured=secured) == (get, ())
    if not secured:  # plain TCP sends a large frame straight from its buffer: nothing to overlap
        large_put = _put_request([os.urandom(2 * WIRE_PIECE_BYTES)])
        assert on_the_wire(*large_put, secured=False) == large_put


def _greeted_service() -> StorageService:
    service = StorageService()
    hello = StorageRequest(1, StorageHello(PROTOCOL_VERSION, "3.11.0", "client", OWNER))
    assert service.handle(PEER, encode_storage_request(hello), []).reply.status is StorageStatus.OK
    return service


def test_the_server_stores_a_put_in_pieces_as_the_frames_it_was_put_in() -> None:
    frames = [b"marker", os.urandom(2 * WIRE_PIECE_BYTES + 3), os.urandom(100)]
    service = _greeted_service()
    wired, pieces = on_the_wire(*_put_request(frames), secured=True)
    answer = service.handle(PEER, encode_storage_request(wired), list(pieces))
    assert answer is not None and answer.reply.status is StorageStatus.OK
    stored = service.store.get(OBJECT)
    assert stored is not None and stored.frames is not None
    assert [bytes(frame) for frame in stored.frames] == frames
    got = service.handle(PEER, encode_storage_request(StorageRequest(5, Get(OBJECT))), [])
    assert got is not None and got.reply.value == ObjectSize(sum(map(len, frames)))
    assert [bytes(frame) for frame in got.payload] == frames


def test_pieces_that_are_not_the_named_frames_are_a_bad_request_and_store_nothing() -> None:
    service = _greeted_service()
    pieces = wire_pieces([os.urandom(2 * WIRE_PIECE_BYTES)])
    put = Put(OBJECT, OWNER, 2 * WIRE_PIECE_BYTES, "", (WIRE_PIECE_BYTES + 1, WIRE_PIECE_BYTES - 1))
    answer = service.handle(PEER, encode_storage_request(StorageRequest(6, put)), list(pieces))
    assert answer is not None and answer.reply.status is StorageStatus.BAD_REQUEST
    assert "not pieces of frames" in answer.reply.reason
    assert not service.store.exists(OBJECT)


def test_a_value_read_from_pieces_is_whole_and_writable() -> None:
    """An array whose buffer came in pieces is rebuilt from them, writable (as one received whole and copied on write
    is). Checked to fail with the pieces joined into bytes (read-only)."""
    numpy = pytest.importorskip("numpy")
    array = numpy.arange(3 * WIRE_PIECE_BYTES // 8, dtype=numpy.int64)
    frames = serialize_to_frames(DefaultSerializer(), array)
    assert len(frames) == 3  # marker, pickle stream, the array's buffer out of band
    pieces = [memoryview(bytes(piece)) for piece in wire_pieces(frames)]  # received: read-only
    assert len(pieces) > len(frames)
    value = deserialize_frames(DefaultSerializer(), pieces)
    assert numpy.array_equal(value, array)
    assert value.flags.writeable


def test_a_get_answered_in_pieces_gives_the_frames_that_were_put() -> None:
    """A CURVE server cuts a get's frames over WIRE_PIECE_BYTES into pieces and names the frames' lengths in the
    reply; the reader joins them again, so that what it sees (and hashes: TaskEncoder.stored_id) is the frames as put.
    Fails if the reader passes the pieces on (four frames instead of two), or if the reply does not name the lengths."""
    from scaler.object_storage.client_core import frames_as_put
    from scaler.protocol.storage_messages import WIRE_PIECE_BYTES, StorageReply, StorageStatus, wire_pieces

    frames = [memoryview(b"m" * 17), memoryview(bytes(range(256)) * (3 * WIRE_PIECE_BYTES // 256 + 1))]
    pieces = wire_pieces(frames)
    assert len(pieces) > len(frames)
    reply = StorageReply(1, StorageStatus.OK, frame_bytes=tuple(len(frame) for frame in frames))
    joined = frames_as_put(reply, pieces, "tcp://127.0.0.1:1")
    assert [bytes(frame) for frame in joined] == [bytes(frame) for frame in frames]
    assert frames_as_put(StorageReply(1, StorageStatus.OK), frames, "tcp://127.0.0.1:1") == frames


def test_pieces_that_do_not_make_the_named_frames_are_an_error() -> None:
    from scaler.errors import ObjectStorageException
    from scaler.object_storage.client_core import frames_as_put
    from scaler.protocol.storage_messages import StorageReply, StorageStatus

    reply = StorageReply(1, StorageStatus.OK, frame_bytes=(10, 20))
    with pytest.raises(ObjectStorageException, match="do not make frames"):
        frames_as_put(reply, [memoryview(b"x" * 10), memoryview(b"y" * 5)], "tcp://127.0.0.1:1")
