"""The object table of the storage server: payloads by object id, indexed by owner, with size accounting.

Pure: no zmq, no asyncio, no clock. Payloads are kept as the sized buffers they arrived in (zmq frames on
the server, bytes in tests), never joined, so a 2 GiB object costs no copy here.

Invariants:
- every object id is in exactly one owner's id set when its owner id is not empty, and in none otherwise;
- `total_bytes` is the sum of `StoredObject.total_bytes` over all objects;
- an owner id appears in the index only while it owns at least one object.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from scaler.protocol.storage_messages import StorageInfo

#: An owner id meaning "owned by nobody"; such objects are never removed by `delete_owner`.
NO_OWNER = b""


class PayloadBuffer(Protocol):
    """What the store needs of a payload frame: its size in bytes (zmq.Frame, bytes, a byte memoryview)."""

    def __len__(self) -> int: ...


@dataclass(frozen=True, slots=True)
class StoredObject:
    owner_id: bytes
    frames: tuple[PayloadBuffer, ...]  #: the payload, in order, as received
    total_bytes: int  #: sum of len(frame) over `frames`
    name: str


class ObjectStore:
    """Objects by id, plus an owner -> ids index so a departed client's objects go in one call."""

    def __init__(self) -> None:
        #: object id -> the object; the only place payloads are referenced.
        self._objects: dict[bytes, StoredObject] = {}
        #: owner id -> ids of the objects it owns; must agree with `StoredObject.owner_id` in `_objects`.
        self._ids_by_owner: dict[bytes, set[bytes]] = {}
        #: sum of total_bytes of everything in `_objects`.
        self._total_bytes = 0

    def __len__(self) -> int:
        return len(self._objects)

    def put(self, object_id: bytes, owner_id: bytes, frames: Sequence[PayloadBuffer], name: str = "") -> StoredObject:
        """Store an object; an existing object with the same id is replaced (its owner may change)."""
        self._remove(object_id)
        stored = StoredObject(owner_id, tuple(frames), sum(len(frame) for frame in frames), name)
        self._objects[object_id] = stored
        self._total_bytes += stored.total_bytes
        if owner_id != NO_OWNER:
            self._ids_by_owner.setdefault(owner_id, set()).add(object_id)
        return stored

    def get(self, object_id: bytes) -> StoredObject | None:
        return self._objects.get(object_id)

    def exists(self, object_id: bytes) -> bool:
        return object_id in self._objects

    def delete(self, object_ids: Iterable[bytes]) -> int:
        """Remove the objects; ids that are not stored are ignored. Returns how many were removed."""
        return sum(1 for object_id in object_ids if self._remove(object_id))

    def delete_owner(self, owner_id: bytes) -> int:
        """Remove every object put with this owner id. Returns how many were removed."""
        if owner_id == NO_OWNER:
            return 0
        return self.delete(list(self._ids_by_owner.get(owner_id, ())))

    def info(self) -> StorageInfo:
        return StorageInfo(len(self._objects), self._total_bytes, len(self._ids_by_owner))

    def _remove(self, object_id: bytes) -> bool:
        stored = self._objects.pop(object_id, None)
        if stored is None:
            return False
        self._total_bytes -= stored.total_bytes
        owned = self._ids_by_owner.get(stored.owner_id)
        if owned is not None:
            owned.discard(object_id)
            if not owned:
                del self._ids_by_owner[stored.owner_id]
        return True
