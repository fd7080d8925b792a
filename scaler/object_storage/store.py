"""The object table of the storage server: payloads by object id, indexed by owner, kept within a memory budget.

Pure: no zmq, no asyncio, no clock, no file. Payloads are kept as the sized buffers they arrived in (zmq frames
on the server, bytes in tests), never joined, so a 2 GiB object costs no copy here. The disk work this table
decides on (write an object's spill file, read one back, remove one) is handed out as `DiskWork` values for the
shell to carry out (`take_work`); the shell reports back with `write_finished` and `read_finished`.

Where an object is (`Residence`), and what moves it:

    put, spill directory        -> WRITING          (the put is answered when the write finishes)
    put, no spill directory     -> MEMORY           (refused instead when it does not fit in the budget)
    WRITING, written            -> MEMORY_AND_DISK  (evictable: leaving memory costs no I/O)
    WRITING, write failed       -> MEMORY           (kept if it fits in the budget; removed and refused if not)
    MEMORY_AND_DISK, evicted    -> DISK             (least recently used first, while over the budget)
    DISK, read back (a get)     -> MEMORY_AND_DISK  (the most recently used; a torn file removes the object)
    found at start in the spill directory -> DISK

With a spill directory every object is written through, so eviction never waits for a write, and every object
whose put was answered is in a spill file, which is what lets a restarted server find them all.

Invariants:
- every object id is in exactly one owner's id set when its owner id is not empty, and in none otherwise;
- `total_bytes` is the sum of `StoredObject.total_bytes` over all objects; `memory_bytes` over those whose
  frames are held (`frames is not None`); `disk_bytes` over MEMORY_AND_DISK and DISK objects;
- `_evictable` holds exactly the MEMORY_AND_DISK objects, least recently used first;
- a spill file is removed only once no read of it is under way (a get that waited for it is answered with its
  object even when the object was deleted or replaced meanwhile), and never while its object holds it;
- after every call, `memory_bytes <= budget` unless only pinned objects (MEMORY, WRITING) remain in memory;
- an owner id appears in the index only while it owns at least one object.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from scaler.config.byte_size import format_byte_size
from scaler.protocol.storage_messages import StorageInfo

#: An owner id meaning "owned by nobody"; such objects are never removed by `delete_owner`.
NO_OWNER = b""


class PayloadBuffer(Protocol):
    """What the store needs of a payload frame: its size in bytes (zmq.Frame, bytes, a byte memoryview)."""

    def __len__(self) -> int: ...


class Residence(enum.Enum):
    MEMORY = "memory"  #: in memory only: no spill directory, or its file could not be written (pinned)
    WRITING = "writing"  #: in memory while its spill file is written (pinned)
    MEMORY_AND_DISK = "memory and disk"  #: evictable
    DISK = "disk"  #: in its spill file only; a get reads it back


@dataclass(slots=True)
class StoredObject:
    owner_id: bytes
    total_bytes: int  #: sum of len(frame) over the payload
    name: str
    frames: tuple[PayloadBuffer, ...] | None  #: the payload, in order, as received or read back; None on disk only
    residence: Residence
    generation: int = 0  #: of its spill file (a new one per put, so a late write of a replaced object is known)


@dataclass(frozen=True, slots=True)
class WriteFile:
    object_id: bytes
    generation: int
    owner_id: bytes
    name: str
    frames: tuple[PayloadBuffer, ...]


@dataclass(frozen=True, slots=True)
class ReadFile:
    object_id: bytes
    generation: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class RemoveFile:
    object_id: bytes
    generation: int


DiskWork = WriteFile | ReadFile | RemoveFile


@dataclass(frozen=True, slots=True)
class Refusal:
    """A put the store cannot hold; `reason` names the limit."""

    reason: str


class ObjectStore:
    """Objects by id, an owner -> ids index so a departed client's objects go in one call, and the memory budget.

    `budget`: bytes of payload held in memory (None: no limit). `spills`: a spill directory exists (objects are
    written through and may leave memory). `first_generation`: above every spill file generation found at start.
    """

    def __init__(self, budget: int | None = None, spills: bool = False, first_generation: int = 1) -> None:
        self.budget = budget
        self.spills = spills
        #: object id -> the object; the only place payloads are referenced.
        self._objects: dict[bytes, StoredObject] = {}
        #: owner id -> ids of the objects it owns; must agree with `StoredObject.owner_id` in `_objects`.
        self._ids_by_owner: dict[bytes, set[bytes]] = {}
        #: MEMORY_AND_DISK object ids, least recently used first.
        self._evictable: OrderedDict[bytes, None] = OrderedDict()
        #: (object id, generation) of the reads handed out and not finished: one read serves every waiting get.
        self._reading: set[tuple[bytes, int]] = set()
        #: files of removed objects that are being read: removed when the read finishes.
        self._remove_after_read: set[tuple[bytes, int]] = set()
        self._work: list[DiskWork] = []
        self._next_generation = first_generation
        self._total_bytes = 0
        self._memory_bytes = 0
        self._disk_bytes = 0

    def __len__(self) -> int:
        return len(self._objects)

    @property
    def memory_bytes(self) -> int:
        return self._memory_bytes

    @property
    def disk_bytes(self) -> int:
        return self._disk_bytes

    def take_work(self) -> list[DiskWork]:
        """The disk work decided since the last call, in order (a removal follows the write it undoes)."""
        work, self._work = self._work, []
        return work

    # ------------------------------------------------------------ requests

    def put(
        self, object_id: bytes, owner_id: bytes, frames: Sequence[PayloadBuffer], name: str = ""
    ) -> StoredObject | Refusal:
        """Store an object; an existing object with the same id is replaced (its owner may change). Without a
        spill directory, an object that does not fit in the budget is refused and nothing changes."""
        size = sum(len(frame) for frame in frames)
        if not self.spills and self.budget is not None:
            old = self._objects.get(object_id)
            held = self._memory_bytes - (old.total_bytes if old is not None and old.frames is not None else 0)
            if held + size > self.budget:
                return Refusal(
                    f"object storage is full: object {object_id.hex()} ({format_byte_size(size)}) does not fit in "
                    f"its memory budget (max-memory) of {format_byte_size(self.budget)}, of which "
                    f"{format_byte_size(held)} is taken, and it has no spill directory to move objects to"
                )
        self._remove(object_id)
        if self.spills:
            stored = StoredObject(owner_id, size, name, tuple(frames), Residence.WRITING, self._next_generation)
            self._next_generation += 1
            self._work.append(WriteFile(object_id, stored.generation, owner_id, name, tuple(frames)))
        else:
            stored = StoredObject(owner_id, size, name, tuple(frames), Residence.MEMORY)
        self._insert(object_id, stored)
        self._evict()
        return stored

    def get(self, object_id: bytes) -> StoredObject | None:
        """The object (its frames are None when it is on disk only: see `read_back`); a get makes it the most
        recently used."""
        stored = self._objects.get(object_id)
        if stored is not None and object_id in self._evictable:
            self._evictable.move_to_end(object_id)
        return stored

    def exists(self, object_id: bytes) -> bool:
        return object_id in self._objects

    def read_back(self, object_id: bytes) -> tuple[bytes, int] | None:
        """For an object on disk only: hand out its read (once, however many gets wait for it). Returns the
        (object id, generation) that `read_finished` will name, or None when the object is in memory or gone."""
        stored = self._objects.get(object_id)
        if stored is None or stored.residence is not Residence.DISK:
            return None
        key = (object_id, stored.generation)
        if key not in self._reading:
            self._reading.add(key)
            self._work.append(ReadFile(object_id, stored.generation, stored.total_bytes))
        return key

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

    # ------------------------------------------------------------ what the disk did

    def restore(self, object_id: bytes, owner_id: bytes, total_bytes: int, name: str, generation: int) -> None:
        """An object found in the spill directory at start (on disk only, as it was)."""
        self._remove(object_id)
        self._insert(object_id, StoredObject(owner_id, total_bytes, name, None, Residence.DISK, generation))
        self._next_generation = max(self._next_generation, generation + 1)

    def write_finished(self, object_id: bytes, generation: int, error: str | None) -> Refusal | None:
        """A spill file was written (`error` None) or could not be. Returns the refusal of its put, if any: a
        failed write leaves the object in memory only, and removes it if it does not fit there."""
        stored = self._objects.get(object_id)
        if stored is None or stored.generation != generation:  # deleted or replaced while it was written
            if error is None:
                self._work.append(RemoveFile(object_id, generation))
            return None
        if error is None:
            stored.residence = Residence.MEMORY_AND_DISK
            self._evictable[object_id] = None
            self._disk_bytes += stored.total_bytes
            self._evict()
            return None
        stored.residence, stored.generation = Residence.MEMORY, 0
        # nothing evictable is left in memory while it is over the budget (eviction follows every growth)
        if self.budget is None or self._memory_bytes <= self.budget:
            return None
        self._remove(object_id)
        return Refusal(
            f"object storage is full: object {object_id.hex()} ({format_byte_size(stored.total_bytes)}) could not "
            f"be written to the spill directory ({error}) and does not fit in the memory budget (max-memory) of "
            f"{format_byte_size(self.budget)}, which objects that could not be spilled fill"
        )

    def read_finished(self, object_id: bytes, generation: int, frames: Sequence[PayloadBuffer] | None) -> None:
        """A spill file was read back (`frames`), or found torn or missing (None: the object is lost)."""
        self._reading.discard((object_id, generation))
        if (object_id, generation) in self._remove_after_read:  # deleted or replaced while it was read
            self._remove_after_read.discard((object_id, generation))
            self._work.append(RemoveFile(object_id, generation))
        stored = self._objects.get(object_id)
        if stored is None or stored.generation != generation or stored.residence is not Residence.DISK:
            return
        if frames is None:
            self._remove(object_id)
            return
        stored.frames, stored.residence = tuple(frames), Residence.MEMORY_AND_DISK
        self._memory_bytes += stored.total_bytes
        self._evictable[object_id] = None
        self._evict()

    def abandon_reads(self) -> list[RemoveFile]:
        """The server stops: the reads under way will not be reported. Returns the removals that waited for them
        (of objects deleted or replaced meanwhile), which must still be done."""
        self._reading.clear()
        removals = [RemoveFile(object_id, generation) for object_id, generation in self._remove_after_read]
        self._remove_after_read.clear()
        return removals

    # ------------------------------------------------------------ internals

    def _insert(self, object_id: bytes, stored: StoredObject) -> None:
        self._objects[object_id] = stored
        self._total_bytes += stored.total_bytes
        if stored.frames is not None:
            self._memory_bytes += stored.total_bytes
        if stored.residence is Residence.DISK:
            self._disk_bytes += stored.total_bytes
        if stored.owner_id != NO_OWNER:
            self._ids_by_owner.setdefault(stored.owner_id, set()).add(object_id)

    def _evict(self) -> None:
        """Drop the frames of the least recently used evictable objects while memory is over the budget."""
        if self.budget is None:
            return
        while self._memory_bytes > self.budget and self._evictable:
            object_id, _ = self._evictable.popitem(last=False)
            stored = self._objects[object_id]
            stored.frames, stored.residence = None, Residence.DISK
            self._memory_bytes -= stored.total_bytes

    def _remove(self, object_id: bytes) -> bool:
        stored = self._objects.pop(object_id, None)
        if stored is None:
            return False
        self._total_bytes -= stored.total_bytes
        if stored.frames is not None:
            self._memory_bytes -= stored.total_bytes
        self._evictable.pop(object_id, None)
        if stored.residence in (Residence.MEMORY_AND_DISK, Residence.DISK):
            self._disk_bytes -= stored.total_bytes
            if (object_id, stored.generation) in self._reading:
                self._remove_after_read.add((object_id, stored.generation))
            else:
                self._work.append(RemoveFile(object_id, stored.generation))
        # a WRITING object's file is removed when its write finishes (`write_finished` finds it gone)
        owned = self._ids_by_owner.get(stored.owner_id)
        if owned is not None:
            owned.discard(object_id)
            if not owned:
                del self._ids_by_owner[stored.owner_id]
        return True
