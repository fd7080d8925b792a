"""A large object put from the storage's host is written, not hashed: its digest (what finds the same content sent
again) is taken from its stored copy, and only once another object of its size comes (issue 40: `send_object` of
100 MB cost its sha256 on top of its write, as much again).

The storage here is a dict read back without a transfer, as a client on the storage's host reads its objects (mapped
by name): `TaskEncoder(stored=...)` with `reads_locally()` true.

Checked by hand with the mechanism off (`_put_large` hashing at once whatever `reads_locally` says, as before):
`test_a_large_object_is_stored_without_being_hashed` fails (one digest of the whole object per put); with the read
back off (`_digest_stored` a no-op), `test_the_same_content_sent_again_is_found_by_its_stored_copy` fails (stored
twice).
"""

from __future__ import annotations

from typing import Any

import pytest

from scaler.payload import task_encoder
from scaler.payload.serializer import DefaultSerializer
from scaler.payload.stored_objects import StoredOnce
from scaler.payload.task_encoder import LARGE_OBJECT_BYTES, TaskEncoder
from scaler.protocol.ids import ClientID, ObjectID

CLIENT = ClientID(b"Client|large")
SIZE = LARGE_OBJECT_BYTES + 64


class LocalStorage:
    """Objects by id, as stored (frames kept as copies: the caller's buffers may change after the put)."""

    def __init__(self, local: bool = True) -> None:
        self.objects: dict[ObjectID, list[bytes]] = {}
        self.local = local

    def put(self, object_id: ObjectID, payload: Any, _name: str) -> None:
        frames = payload if isinstance(payload, list) else [payload]
        self.objects[object_id] = [bytes(frame) for frame in frames]

    def reads_locally(self) -> bool:
        return self.local

    def stored_frames(self, object_id: ObjectID) -> list[memoryview] | None:
        frames = self.objects.get(object_id)
        return None if frames is None else [memoryview(frame) for frame in frames]


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the payloads the encoder hashes."""
    sizes: list[int] = []
    original = task_encoder.content_id

    def counting(owner: bytes, payload: Any) -> ObjectID:
        sizes.append(task_encoder.frames_size(payload))
        return original(owner, payload)

    monkeypatch.setattr(task_encoder, "content_id", counting)
    return sizes


def _encoder(storage: LocalStorage) -> TaskEncoder:
    return TaskEncoder(CLIENT, DefaultSerializer(), StoredOnce(storage.put), stored=storage)


def test_a_large_object_is_stored_without_being_hashed(hashed: list[int]) -> None:
    storage = LocalStorage()
    encoder = _encoder(storage)
    first = encoder.put_object(bytearray(SIZE), "zeros")
    second = encoder.put_object([b"head", bytearray(SIZE)], "frames")
    assert hashed == [] and set(storage.objects) == {first, second}


def test_the_same_content_sent_again_is_found_by_its_stored_copy(hashed: list[int]) -> None:
    storage = LocalStorage()
    encoder = _encoder(storage)
    payload = bytearray(SIZE)
    payload[:5] = b"first"
    stored = encoder.put_object(payload, "object")
    assert encoder.put_object(bytes(payload), "object again") == stored
    assert len(storage.objects) == 1 and hashed == [SIZE, SIZE]  # the new payload and the stored copy, once each
    payload[:5] = b"other"  # the caller changed its buffer after the put: the stored copy is what counts
    changed = encoder.put_object(payload, "changed")
    assert changed != stored and len(storage.objects) == 2
    assert encoder.put_object(bytes(payload), "changed again") == changed


def test_frames_and_one_buffer_of_equal_bytes_stay_apart_and_a_deleted_object_is_stored_again() -> None:
    storage = LocalStorage()
    encoder = _encoder(storage)
    frames = encoder.put_object([b"a" * 64, b"b" * (SIZE - 64)], "frames")
    joined = encoder.put_object(b"a" * 64 + b"b" * (SIZE - 64), "joined")
    assert joined != frames  # content ids hash frames with their lengths, as before
    assert encoder.put_object([b"a" * 64, b"b" * (SIZE - 64)], "frames again") == frames
    del storage.objects[joined]  # deleted meanwhile: its digest is not known, its content is stored again
    other = _encoder(storage)
    other_id = other.put_object(b"c" * SIZE, "first of its size")
    del storage.objects[other_id]
    assert other.put_object(b"c" * SIZE, "again") not in (other_id, frames)


def test_elsewhere_a_large_object_is_hashed_while_it_is_stored(hashed: list[int]) -> None:
    storage = LocalStorage(local=False)
    encoder = _encoder(storage)
    stored = encoder.put_object(bytearray(SIZE), "zeros")
    assert hashed == [SIZE]
    assert encoder.put_object(bytearray(SIZE), "zeros again") == stored and len(storage.objects) == 1
