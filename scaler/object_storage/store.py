"""The object table of the storage server: payloads by object id, indexed by owner, kept within a memory budget.

Pure: no zmq, no asyncio, no clock, no file. Payloads are kept as the sized buffers they arrived in (zmq frames
on the server, bytes in tests), never joined, so a 2 GiB object costs no copy here. The file work this table
decides on is handed out as `DiskWork` values for the shell to carry out (`take_work`); the shell reports back with
`write_finished`, `read_finished`, `segment_written` and `adopted`.

**Two places in memory.** With a segment directory (`segments`: shared memory on the server's host,
segment_directory.py), an object from `segment_from_bytes` on is held as a *segment file* there, which the processes
of the host map instead of receiving its bytes; smaller objects, and any object whose segment file could not be
written (the directory is full), are held as frames in this process. Both count in the budget (`memory_bytes`).
Where an object's bytes are in memory (`Segment`, with `frames`):

    put, small (or no segment directory)      -> frames held                  (NONE)
    put, large                                -> frames held, WRITING         (WriteSegment: a temporary file, on a
                                                                               thread; the put waits)
    WRITING, written                          -> READY, frames dropped        (PlaceSegment: renamed into place)
    WRITING, write failed                     -> frames held                  (NONE: kept in this process)
    adopt (a peer of the host wrote the file) -> READY                        (AdoptSegment: renamed into place)
    adopt of an object held with the same owner and size, its file gone     (AdoptSegment, `held`: a request sent
                                              -> unchanged                   again after its file was adopted)
    READY, evicted / deleted / replaced       -> gone                         (RemoveSegment: unlinked at once)
    DISK, read back, large                    -> READY                        (the read writes a temporary segment)

Renames into place and removals of segment files are carried out by the shell *synchronously*, in the order they
are handed out, before the next event: so a segment file named after an object always holds the current object,
and a deleted object's file is gone before its delete is answered (a reader that maps objects by their name sees
what a get would). Writes of temporary files (unique names) run on threads. A reader that still maps an unlinked
segment keeps its pages: they are its memory from then on, freed when its last mapping goes (docs/architecture.md,
"Objects in shared memory").

Where an object is with respect to the spill directory (`Residence`), and what moves it:

    put, spill directory        -> WRITING          (the put is answered when the write finishes)
    put, no spill directory     -> MEMORY           (refused instead when it does not fit in the budget)
    WRITING, written            -> MEMORY_AND_DISK  (evictable: leaving memory costs no I/O)
    WRITING, write failed       -> MEMORY           (kept if it fits in the budget; removed and refused if not)
    MEMORY_AND_DISK, evicted    -> DISK             (least recently used first, while over the budget)
    DISK, read back (a get)     -> MEMORY_AND_DISK  (the most recently used; a torn file removes the object)
    found at start in the spill directory -> DISK
    found at start in the segment directory -> MEMORY (without a spill directory; with one, the segment files of
                                                      objects found in spill files are dropped: the spill files are
                                                      the truth; the others are taken: WRITING)

With a spill directory every object is written through, so eviction never waits for a write, and every object
whose put was answered is in a spill file, which is what lets a restarted server find them all. A put (or adopt) is
answered once it is *settled*: neither its spill file nor its segment file is being written.

Invariants:
- every object id is in exactly one owner's id set when its owner id is not empty, and in none otherwise;
- `total_bytes` is the sum of `StoredObject.total_bytes` over all objects; `memory_bytes` over those in memory
  (`StoredObject.in_memory`: frames held, or a segment file written or being written); `disk_bytes` over
  MEMORY_AND_DISK and DISK objects;
- `_evictable` holds exactly the MEMORY_AND_DISK objects whose segment is not being written, least recently used
  first;
- a spill file is removed only once no read of it is under way (a get that waited for it is answered with its
  object even when the object was deleted or replaced meanwhile), and never while its object holds it;
- after every call, `memory_bytes <= budget` unless only pinned objects (MEMORY, WRITING, a segment being written)
  remain in memory;
- an owner id appears in the index only while it owns at least one object.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scaler.config.byte_size import format_byte_size
from scaler.protocol.storage_messages import StorageInfo

#: An owner id meaning "owned by nobody"; such objects are never removed by `delete_owner`.
NO_OWNER = b""


class PayloadBuffer(Protocol):
    """What the store needs of a payload frame: its size in bytes (zmq.Frame, bytes, a byte memoryview)."""

    def __len__(self) -> int: ...


#: Objects from this size are held as segment files (when the store has a segment directory); smaller ones are frames
#: in the server: a file costs a page and three system calls, a map more than a small copy.
SEGMENT_FROM_BYTES = 64 * 1024


class Segment(enum.Enum):
    NONE = "none"  #: no segment file: the bytes are `frames` in this process, or on disk only
    WRITING = "writing"  #: its segment file is being written; `frames` hold the bytes meanwhile (pinned)
    READY = "ready"  #: in its segment file; `frames` is None


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
    frames: tuple[PayloadBuffer, ...] | None  #: the payload, in order, as received or read back; None: not held here
    residence: Residence
    generation: int = 0  #: of its put (a new one per put, so a late write of a replaced object is known)
    segment: Segment = Segment.NONE

    @property
    def in_memory(self) -> bool:
        """Held in memory, and counted in the budget: as frames here, or as a segment file (written or being so)."""
        return self.frames is not None or self.segment is not Segment.NONE


@dataclass(frozen=True, slots=True)
class WriteFile:
    """Write the object's spill file, from `frames`, or from its segment file when None (mapped at once)."""

    object_id: bytes
    generation: int
    owner_id: bytes
    name: str
    frames: tuple[PayloadBuffer, ...] | None


@dataclass(frozen=True, slots=True)
class ReadFile:
    """Read a spill file back; with a `segment_token`, into the temporary segment file of that token."""

    object_id: bytes
    generation: int
    total_bytes: int
    segment_token: int = 0
    owner_id: bytes = field(default=b"", compare=False)  #: what the segment file's header says
    name: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class RemoveFile:
    object_id: bytes
    generation: int


@dataclass(frozen=True, slots=True)
class WriteSegment:
    """Write the temporary segment file of `token` from `frames` (on a thread); reported by `segment_written`."""

    object_id: bytes
    generation: int
    token: int
    owner_id: bytes
    name: str
    frames: tuple[PayloadBuffer, ...]


@dataclass(frozen=True, slots=True)
class PlaceSegment:
    """Rename the temporary segment file of `token` to the object's segment file (at once)."""

    object_id: bytes
    token: int


@dataclass(frozen=True, slots=True)
class AdoptSegment:
    """Rename the file a peer wrote (`file_name`, checked first) to the object's segment file (at once); reported by
    `adopted`. A file already adopted (a request sent again to a restarted server) is found in place.

    `held`: the store holds the object already with this owner and size (`generation` is its), so the request may
    have come again after its file was adopted (its answer was lost, or the server restarted and restored it): a
    file that is gone is then no error and changes nothing (`ADOPTED_BEFORE`), whether or not the object is still in
    a segment file (it may have been spilled and evicted, or restored from its spill file); a file still there
    replaces the object, as any adopt does."""

    object_id: bytes
    generation: int
    owner_id: bytes
    total_bytes: int
    file_name: str
    held: bool = False
    name: str = ""  #: the object's name, for a held object's replacement


class AdoptResult(enum.Enum):
    """What the shell reports of a held adopt (`AdoptSegment.held`) whose file is gone (None: renamed into place; a
    string: why the file was refused)."""

    ADOPTED_BEFORE = "adopted before"


ADOPTED_BEFORE = AdoptResult.ADOPTED_BEFORE


@dataclass(frozen=True, slots=True)
class DiscardPutFile:
    """Remove the file of an adopt that was refused (at once): nobody else will."""

    file_name: str


@dataclass(frozen=True, slots=True)
class RemoveSegment:
    """Unlink the object's segment file (at once)."""

    object_id: bytes


@dataclass(frozen=True, slots=True)
class DiscardSegment:
    """Unlink the temporary segment file of `token` (at once): its object went while it was written."""

    object_id: bytes
    token: int


DiskWork = (
    WriteFile
    | ReadFile
    | RemoveFile
    | WriteSegment
    | PlaceSegment
    | AdoptSegment
    | RemoveSegment
    | DiscardSegment
    | DiscardPutFile
)
#: The work the shell carries out at once, in order, before the next event (the rest runs on threads).
IMMEDIATE_WORK = (PlaceSegment, AdoptSegment, RemoveSegment, DiscardSegment, DiscardPutFile)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A put the store cannot hold; `reason` names the limit."""

    reason: str


class ObjectStore:
    """Objects by id, an owner -> ids index so a departed client's objects go in one call, and the memory budget.

    `budget`: bytes of payload held in memory (None: no limit). `spills`: a spill directory exists (objects are
    written through and may leave memory). `first_generation`: above every spill file generation found at start.
    `segments`: a segment directory exists (objects from `segment_from_bytes` on are held as segment files).
    """

    def __init__(
        self,
        budget: int | None = None,
        spills: bool = False,
        first_generation: int = 1,
        segments: bool = False,
        segment_from_bytes: int = SEGMENT_FROM_BYTES,
    ) -> None:
        self.budget = budget
        self.spills = spills
        self.segments = segments
        self.segment_from_bytes = segment_from_bytes
        #: object id -> the object; the only place payloads are referenced.
        self._objects: dict[bytes, StoredObject] = {}
        #: owner id -> ids of the objects it owns; must agree with `StoredObject.owner_id` in `_objects`.
        self._ids_by_owner: dict[bytes, set[bytes]] = {}
        #: MEMORY_AND_DISK object ids whose segment is not being written, least recently used first.
        self._evictable: OrderedDict[bytes, None] = OrderedDict()
        #: (object id, generation) of the reads handed out and not finished: one read serves every waiting get.
        self._reading: set[tuple[bytes, int]] = set()
        #: files of removed objects that are being read: removed when the read finishes.
        self._remove_after_read: set[tuple[bytes, int]] = set()
        #: (object id, generation) -> the token of the segment write under way for it
        self._segment_tokens: dict[tuple[bytes, int], int] = {}
        #: (object id, generation) -> how many writes (spill file, segment file) of that put are under way
        self._writes_under_way: dict[tuple[bytes, int], int] = {}
        self._work: list[DiskWork] = []
        self._next_generation = first_generation
        self._next_token = 1
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
        refusal = self._refusal(object_id, size)
        if refusal is not None:
            return refusal
        self._remove(object_id)
        kept = tuple(frames)
        stored = StoredObject(
            owner_id, size, name, kept, Residence.WRITING if self.spills else Residence.MEMORY, self._generation()
        )
        if self._segment_for(size):
            stored.segment = Segment.WRITING
            token = self._token(object_id, stored.generation)
            self._write(WriteSegment(object_id, stored.generation, token, owner_id, name, kept))
        if self.spills:
            self._write(WriteFile(object_id, stored.generation, owner_id, name, kept))
        self._insert(object_id, stored)
        self._evict()
        return stored

    def adopt(
        self, object_id: bytes, owner_id: bytes, total_bytes: int, file_name: str, name: str = ""
    ) -> StoredObject | Refusal:
        """Store the object whose segment file a peer of the host wrote (`file_name` in the segment directory), as
        `put` does; the shell renames it into place at once and reports with `adopted`. An object held already with
        this owner and size is left as it is until the shell has looked for the file (`AdoptSegment.held`): the
        request may be one sent again after its file was adopted, which must not drop the object."""
        held = self._objects.get(object_id)
        if held is not None and held.owner_id == bytes(owner_id) and held.total_bytes == total_bytes:
            self._work.append(
                AdoptSegment(object_id, held.generation, owner_id, total_bytes, file_name, held=True, name=name)
            )
            return held
        refusal = self._refusal(object_id, total_bytes)
        if refusal is not None:
            return refusal
        self._remove(object_id, renamed_over=True)
        stored = StoredObject(
            owner_id, total_bytes, name, None, Residence.WRITING if self.spills else Residence.MEMORY,
            self._generation(), Segment.WRITING,
        )  # fmt: skip
        self._work.append(AdoptSegment(object_id, stored.generation, owner_id, total_bytes, file_name))
        self._insert(object_id, stored)
        return stored

    def refuse_adopt(self, file_name: str) -> None:
        """An adopt was refused before its file was looked at: the file goes."""
        self._work.append(DiscardPutFile(file_name))

    def get(self, object_id: bytes) -> StoredObject | None:
        """The object (neither frames nor a READY segment when it is on disk only: see `read_back`); a get makes it
        the most recently used."""
        stored = self._objects.get(object_id)
        if stored is not None and object_id in self._evictable:
            self._evictable.move_to_end(object_id)
        return stored

    def peek(self, object_id: bytes) -> StoredObject | None:
        """The object, as `get` gives it, without making it the most recently used (a look, not a use: monitoring)."""
        return self._objects.get(object_id)

    def exists(self, object_id: bytes) -> bool:
        return object_id in self._objects

    def settled(self, object_id: bytes, generation: int) -> bool:
        """Whether the put of that generation waits for nothing more: no write of its spill or segment file under
        way (even when the object was replaced or deleted since: a write under way may still leave a file)."""
        return (object_id, generation) not in self._writes_under_way

    def read_back(self, object_id: bytes) -> tuple[bytes, int] | None:
        """For an object on disk only: hand out its read (once, however many gets wait for it). Returns the
        (object id, generation) that `read_finished` will name, or None when the object is in memory or gone."""
        stored = self._objects.get(object_id)
        if stored is None or stored.residence is not Residence.DISK:
            return None
        key = (object_id, stored.generation)
        if key not in self._reading:
            self._reading.add(key)
            token = 0
            if self._segment_for(stored.total_bytes):
                token = self._token(object_id, stored.generation)
            self._work.append(
                ReadFile(object_id, stored.generation, stored.total_bytes, token, stored.owner_id, stored.name)
            )
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

    def restore_segment(self, object_id: bytes, owner_id: bytes, total_bytes: int, name: str) -> bool:
        """An object found in the segment directory at start. Without a spill directory it is taken (held in memory
        only, as it was). With one, the spill files are the truth where they have the object: a segment file cannot
        tell whether it holds that object's answered put or a later one whose spill file a crash cut short, so it is
        not taken (returns False: its file must go) and a get reads the spill file back. Where no spill file has the
        object, the file holds a put its predecessor placed (readers had it) and was killed before writing through,
        not answered yet: it is taken and written through, as an unanswered put is (its writer's request sent again
        finds it held). Segment files count even over the budget."""
        if self.spills and object_id in self._objects:
            return False
        self._remove(object_id, renamed_over=True)
        residence = Residence.WRITING if self.spills else Residence.MEMORY
        stored = StoredObject(owner_id, total_bytes, name, None, residence, self._generation(), Segment.READY)
        if self.spills:
            self._write(WriteFile(object_id, stored.generation, owner_id, name, None))
        self._insert(object_id, stored)
        return True

    def evict(self) -> None:
        """Make room within the budget (after `restore`)."""
        self._evict()

    def take_removals(self) -> list[RemoveSegment]:
        """At start, before the shell has its disk worker: the segment files of the objects `evict` dropped from
        memory, to remove now; the rest of the work stays for the shell's first `take_work`."""
        removals = [work for work in self._work if isinstance(work, RemoveSegment)]
        self._work = [work for work in self._work if not isinstance(work, RemoveSegment)]
        return removals

    def write_finished(self, object_id: bytes, generation: int, error: str | None) -> Refusal | None:
        """A spill file was written (`error` None) or could not be. Returns the refusal of its put, if any: a
        failed write leaves the object in memory only, and removes it if it does not fit there."""
        self._written(object_id, generation)
        stored = self._objects.get(object_id)
        if stored is None or stored.generation != generation:  # deleted or replaced while it was written
            if error is None:
                self._work.append(RemoveFile(object_id, generation))
            return None
        if error is None:
            stored.residence = Residence.MEMORY_AND_DISK
            self._disk_bytes += stored.total_bytes
            if stored.segment is not Segment.WRITING:
                self._evictable[object_id] = None
            self._evict()
            return None
        stored.residence = Residence.MEMORY
        # nothing evictable is left in memory while it is over the budget (eviction follows every growth)
        if self.budget is None or self._memory_bytes <= self.budget:
            return None
        self._remove(object_id)
        return Refusal(
            f"object storage is full: object {object_id.hex()} ({format_byte_size(stored.total_bytes)}) could not "
            f"be written to the spill directory ({error}) and does not fit in the memory budget (max-memory) of "
            f"{format_byte_size(self.budget)}, which objects that could not be spilled fill"
        )

    def segment_written(self, object_id: bytes, generation: int, error: str | None) -> None:
        """A temporary segment file was written (`error` None: renamed into place now) or could not be (the object
        stays in this process's memory)."""
        self._written(object_id, generation)
        token = self._segment_tokens.pop((object_id, generation), 0)
        stored = self._objects.get(object_id)
        if stored is None or stored.generation != generation or stored.segment is not Segment.WRITING:
            if error is None:
                self._work.append(DiscardSegment(object_id, token))
            return
        if error is None:
            self._work.append(PlaceSegment(object_id, token))
            stored.segment, stored.frames = Segment.READY, None
        else:
            stored.segment = Segment.NONE  # its frames stay: the object is held in this process
        if stored.residence is Residence.MEMORY_AND_DISK:
            self._evictable[object_id] = None
        self._evict()

    def adopted(self, work: AdoptSegment, outcome: str | AdoptResult | None) -> int:
        """The file of an adopt was renamed into place (`outcome` None; the spill file is then written from it), or
        could not be (a string: the object is removed, its adopt refused with it), or, for a held object, was gone
        (ADOPTED_BEFORE: nothing changes). Returns the generation whose settling answers the adopt (a held object
        replaced by the file gets a new one)."""
        object_id, generation = work.object_id, work.generation
        stored = self._objects.get(object_id)
        if stored is None or stored.generation != generation or outcome is ADOPTED_BEFORE:
            return generation
        if isinstance(outcome, str):
            if not work.held:  # its file was not renamed into place; the object it replaced kept its file till now
                self._remove(object_id)
                self._work.append(RemoveSegment(object_id))
            return generation
        if work.held:  # the file replaced the held object's segment file: the object is now that file
            self._remove(object_id, renamed_over=True)
            stored = StoredObject(
                work.owner_id, work.total_bytes, work.name, None,
                Residence.WRITING if self.spills else Residence.MEMORY, self._generation(), Segment.WRITING,
            )  # fmt: skip
            self._insert(object_id, stored)
            generation = stored.generation
        stored.segment = Segment.READY
        if self.spills:
            self._write(WriteFile(object_id, generation, stored.owner_id, stored.name, None))
        self._evict()
        return generation

    def read_finished(
        self, object_id: bytes, generation: int, frames: Sequence[PayloadBuffer] | None, in_segment: bool = False
    ) -> None:
        """A spill file was read back (`frames`; `in_segment`: into the temporary segment file of its read, which is
        renamed into place now or discarded), or found torn or missing (None: the object is lost)."""
        token = self._segment_tokens.pop((object_id, generation), 0)
        token = token if in_segment else 0  # not in a segment file: it could not be written, nothing to place
        self._reading.discard((object_id, generation))
        if (object_id, generation) in self._remove_after_read:  # deleted or replaced while it was read
            self._remove_after_read.discard((object_id, generation))
            self._work.append(RemoveFile(object_id, generation))
        stored = self._objects.get(object_id)
        if stored is None or stored.generation != generation or stored.residence is not Residence.DISK:
            if token:
                self._work.append(DiscardSegment(object_id, token))
            return
        if frames is None:
            self._remove(object_id)
            return
        if token:
            self._work.append(PlaceSegment(object_id, token))
            stored.segment = Segment.READY
        else:
            stored.frames = tuple(frames)
        stored.residence = Residence.MEMORY_AND_DISK
        self._memory_bytes += stored.total_bytes
        self._evictable[object_id] = None
        self._evict()

    def spills_under_way(self) -> frozenset[tuple[bytes, int]]:
        """The server stops: the (object id, generation) of the objects still stored whose spill files are being
        written (not those of objects deleted or replaced since)."""
        return frozenset(
            (object_id, generation)
            for object_id, generation in self._writes_under_way
            if (stored := self._objects.get(object_id)) is not None
            and stored.generation == generation
            and stored.residence is Residence.WRITING
        )

    def abandon_reads(self) -> list[RemoveFile]:
        """The server stops: the reads under way will not be reported. Returns the removals that waited for them
        (of objects deleted or replaced meanwhile), which must still be done."""
        self._reading.clear()
        removals = [RemoveFile(object_id, generation) for object_id, generation in self._remove_after_read]
        self._remove_after_read.clear()
        return removals

    # ------------------------------------------------------------ internals

    def _refusal(self, object_id: bytes, size: int) -> Refusal | None:
        if self.spills or self.budget is None:
            return None
        old = self._objects.get(object_id)
        held = self._memory_bytes - (old.total_bytes if old is not None and old.in_memory else 0)
        if held + size <= self.budget:
            return None
        return Refusal(
            f"object storage is full: object {object_id.hex()} ({format_byte_size(size)}) does not fit in "
            f"its memory budget (max-memory) of {format_byte_size(self.budget)}, of which "
            f"{format_byte_size(held)} is taken, and it has no spill directory to move objects to"
        )

    def _segment_for(self, size: int) -> bool:
        """Whether an object of `size` bytes is held as a segment file: from `segment_from_bytes` on, unless it is
        larger than the whole budget with a spill directory (it would leave memory as soon as it is written)."""
        if not self.segments or size < self.segment_from_bytes:
            return False
        return not (self.spills and self.budget is not None and size > self.budget)

    def _write(self, work: WriteFile | WriteSegment) -> None:
        key = (work.object_id, work.generation)
        self._writes_under_way[key] = self._writes_under_way.get(key, 0) + 1
        self._work.append(work)

    def _written(self, object_id: bytes, generation: int) -> None:
        key = (object_id, generation)
        left = self._writes_under_way.get(key, 0) - 1
        if left > 0:
            self._writes_under_way[key] = left
        else:
            self._writes_under_way.pop(key, None)

    def _generation(self) -> int:
        generation = self._next_generation
        self._next_generation += 1
        return generation

    def _token(self, object_id: bytes, generation: int) -> int:
        token = self._next_token
        self._next_token += 1
        self._segment_tokens[(object_id, generation)] = token
        return token

    def _insert(self, object_id: bytes, stored: StoredObject) -> None:
        self._objects[object_id] = stored
        self._total_bytes += stored.total_bytes
        if stored.in_memory:
            self._memory_bytes += stored.total_bytes
        if stored.residence in (Residence.MEMORY_AND_DISK, Residence.DISK):
            self._disk_bytes += stored.total_bytes
        if stored.residence is Residence.MEMORY_AND_DISK and stored.segment is not Segment.WRITING:
            self._evictable[object_id] = None
        if stored.owner_id != NO_OWNER:
            self._ids_by_owner.setdefault(stored.owner_id, set()).add(object_id)

    def _evict(self) -> None:
        """Drop the least recently used evictable objects from memory while memory is over the budget."""
        if self.budget is None:
            return
        while self._memory_bytes > self.budget and self._evictable:
            object_id, _ = self._evictable.popitem(last=False)
            stored = self._objects[object_id]
            if stored.segment is Segment.READY:
                self._work.append(RemoveSegment(object_id))
            stored.frames, stored.residence, stored.segment = None, Residence.DISK, Segment.NONE
            self._memory_bytes -= stored.total_bytes

    def _remove(self, object_id: bytes, renamed_over: bool = False) -> bool:
        """Forget the object. `renamed_over`: its segment file is about to be replaced by a rename (an adopt, a
        restore), so it is not unlinked."""
        stored = self._objects.pop(object_id, None)
        if stored is None:
            return False
        self._total_bytes -= stored.total_bytes
        if stored.in_memory:
            self._memory_bytes -= stored.total_bytes
        if stored.segment is Segment.READY and not renamed_over:
            self._work.append(RemoveSegment(object_id))
        # a segment being written is discarded when its write finishes (`segment_written` finds it gone)
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
