"""A large object put from the storage's host is written, not hashed: its digest (what finds the same content sent
again) is taken from its stored copy, and only once another object of its size comes (issue 40: `send_object` of
100 MB cost its sha256 on top of its write, as much again).

The storage here is a dict read back without a transfer, as a client on the storage's host reads its objects (mapped
by name): `TaskEncoder(stored=...)` with `reads_locally()` true.

Checked by hand with the mechanism off (`_put_new` hashing at once whatever `reads_locally` says, as before):
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


ARGUMENT = 100_000  # U3's arguments: from UNHASHED_FROM_BYTES on, under LARGE_OBJECT_BYTES


def test_an_argument_of_a_few_hundred_kb_is_not_hashed_until_one_of_its_fingerprint_comes(hashed: list[int]) -> None:
    """Checked by hand with the mechanism off (`_fingerprint` returning None under LARGE_OBJECT_BYTES, as before):
    every argument is hashed on the way in, and `hashed` is not empty after the first three puts."""
    storage = LocalStorage()
    encoder = _encoder(storage)
    first = encoder.put_object(b"a" * ARGUMENT, "argument", later=True)
    second = encoder.put_object(b"b" * ARGUMENT, "argument of its size", later=True)
    frames = encoder.put_object([b"c" * 64, b"d" * (ARGUMENT - 64)], "frames")
    assert hashed == [] and len({first, second, frames}) == 3 and len(storage.objects) == 3
    assert all(
        object_id[: task_encoder.OWNER_TAG_BYTES] == task_encoder.owner_tag(CLIENT) for object_id in storage.objects
    )
    assert encoder.put_object(b"a" * ARGUMENT, "the same again") == first
    assert hashed == [ARGUMENT, ARGUMENT] and len(storage.objects) == 3  # the new payload and the stored copy
    assert encoder.stored_id(b"b" * ARGUMENT) == second


def test_objects_differing_only_between_the_fingerprints_pieces_are_told_apart(hashed: list[int]) -> None:
    storage = LocalStorage()
    encoder = _encoder(storage)
    payload = bytearray(ARGUMENT)
    stored = encoder.put_object(bytes(payload), "zeros")
    payload[ARGUMENT // 2 + 1000] = 1  # not in any piece the fingerprint reads
    assert task_encoder.fingerprint(bytes(payload)) == task_encoder.fingerprint(bytes(ARGUMENT))
    other = encoder.put_object(bytes(payload), "one byte differs")
    assert other != stored and len(storage.objects) == 2 and hashed == [ARGUMENT, ARGUMENT]  # both digests taken
    assert encoder.put_object(bytes(payload), "again") == other and encoder.put_object(bytes(ARGUMENT), "0") == stored


def test_elsewhere_an_argument_under_8_mib_is_known_by_its_content_id(hashed: list[int]) -> None:
    storage = LocalStorage(local=False)
    encoder = _encoder(storage)
    stored = encoder.put_object(b"a" * ARGUMENT, "argument")
    assert hashed == [ARGUMENT] and stored == task_encoder.content_id(CLIENT, b"a" * ARGUMENT)


def test_an_object_not_readable_yet_is_stored_again_at_most_once() -> None:
    """A pipelined put may not be stored yet when another object of its fingerprint comes: its digest cannot be taken,
    so the same content is stored once more under its content id, and found by that id from then on."""
    storage = LocalStorage()
    encoder = _encoder(storage)
    first = encoder.put_object(b"a" * ARGUMENT, "argument")
    kept = storage.objects.pop(first)  # as if its put were still on its way
    second = encoder.put_object(b"a" * ARGUMENT, "again")
    storage.objects[first] = kept
    assert second != first and encoder.put_object(b"a" * ARGUMENT, "third") == second and len(storage.objects) == 2
