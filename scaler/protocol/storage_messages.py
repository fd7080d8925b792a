"""Object storage requests and replies as frozen values (schema: `object_storage.capnp`).

Payload bytes never live in these values: they travel as the extra ZeroMQ frames that follow the
encoded header, so that large objects can move without being copied.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from scaler.protocol.ids import ObjectID

#: Largest payload frame; bigger objects are split into frames of this size.
CHUNK_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class StorageHello:
    protocol_version: int
    python_version: str
    role: str
    owner_id: bytes = b""  #: a client's id (the owner of its objects); empty for other roles


@dataclass(frozen=True, slots=True)
class Put:
    object_id: ObjectID
    owner_id: bytes
    total_bytes: int
    name: str = ""


@dataclass(frozen=True, slots=True)
class Get:
    object_id: ObjectID


@dataclass(frozen=True, slots=True)
class Delete:
    object_ids: tuple[ObjectID, ...]


@dataclass(frozen=True, slots=True)
class Exists:
    object_id: ObjectID


@dataclass(frozen=True, slots=True)
class Info:
    pass


@dataclass(frozen=True, slots=True)
class DeleteOwner:
    owner_id: bytes


StorageOperation = StorageHello | Put | Get | Delete | Exists | Info | DeleteOwner


@dataclass(frozen=True, slots=True)
class StorageRequest:
    request_id: int
    operation: StorageOperation


class StorageStatus(enum.Enum):
    OK = "ok"
    NOT_FOUND = "notFound"
    HELLO_REQUIRED = "helloRequired"
    REFUSED = "refused"
    BAD_REQUEST = "badRequest"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class ObjectSize:
    total_bytes: int


@dataclass(frozen=True, slots=True)
class StorageInfo:
    object_count: int
    total_bytes: int
    owner_count: int


#: What a reply carries: an object's size (get), a bool (exists), info, a deleted count, or nothing.
ReplyValue = ObjectSize | bool | StorageInfo | int | None


@dataclass(frozen=True, slots=True)
class StorageReply:
    request_id: int
    status: StorageStatus
    reason: str = ""
    value: ReplyValue = None


def split_chunks(payload: bytes | memoryview) -> list[memoryview]:
    """Views of at most CHUNK_BYTES over the payload; no copy is made."""
    view = memoryview(payload).cast("B") if not isinstance(payload, memoryview) else payload.cast("B")
    if len(view) <= CHUNK_BYTES:
        return [view]
    return [view[offset : offset + CHUNK_BYTES] for offset in range(0, len(view), CHUNK_BYTES)]
