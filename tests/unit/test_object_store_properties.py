"""Every object the store acknowledged reads back as it was put, whatever happened to it (issue 38, goal 1), as a
property over generated histories.

The storage service runs over a store with a budget of a few dozen bytes, so that objects of a few frames leave
memory at once; its disk work is played with the real spill files (`spill_files.py`) in a temporary directory, in
any order the server's threads allow (writes and removals in order on one thread, reads in any order beside them);
writes may fail (a full disk); the server may stop (gracefully: the write under way finishes, the removals queued
are done, the writes queued are dropped) or crash (the write thread got only part of its queue done), and a new one
starts from a scan of the directory. Checked after every step: a get is answered with the frames of the last put
that was answered, frame for frame, or `NOT_FOUND` when there is none; the store's accounting; memory within the
budget unless only pinned objects are left; every object on disk has its file. Checked whenever the disk is idle:
the directory holds exactly the files of the objects on disk (deleted objects leave nothing behind).

Objects from `SEGMENT_FROM` bytes on are held as segment files (issue 40) in a segment directory beside it, played
as the server does: their writes on a thread of their own (in order, possibly failing: a full tmpfs), renames into
place, adoptions and removals at once. Peers also store objects by writing a file there and asking for its adoption,
and read them as a peer of the host does: `getMapped`, then the file by its name. Checked after every step besides
the above: a segment file named after an object holds the frames of its newest put, and is there exactly while the
store holds the object as a segment (so a deleted object's file is gone once its delete is answered: a reader that
maps objects by name never reads one); a graceful stop removes the segment directory, a crash leaves it to the next
server, which drops the files of the objects it found in spill files (the spill files are the truth: a segment file
adopted at start could hold a later put than its object's spill file, found so) and takes the others, writing them
through (a put placed and not answered when the server was killed: a crash may bring it back, as it may its spill
file).

Checked against the mechanisms switched off (by editing the code, then restoring it):
- main's spill file format (frames joined on read-back): fails in every run, e.g. the frames `(b"",)` read back as
  `()`, and several frames as one: the shape of issue 38's lost `bytes` objects (a marker frame, then the bytes);
- `_evict` a no-op: the budget invariant fails in every run;
- the removal of a file not deferred while it is read (`_remove_after_read` unused): found in runs of 1,000 examples
  (a get that waited on a read is answered "lost" after the object was deleted meanwhile), not reliably in the
  default 100, so `test_object_store_budget.py` pins it with an example;
- the removals that waited for reads not done at a stop (`abandon_reads` not called): a deleted object is found
  again after the restart, in runs of 3,000 examples;
- segment removals handed to the segment thread instead of done at once (RemoveSegment queued behind the writes):
  "a segment file is there exactly while the store holds it" fails in every run; `PlaceSegment` for a write of a
  replaced object (the generation check in `segment_written` removed): a file holds an older put's frames.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.segment_files import (
    map_segment,
    scan_segment_directory,
    segment_path,
    write_segment,
)
from scaler.object_storage.server import adopt_segments
from scaler.object_storage.service import Reply, StorageService
from scaler.object_storage.spill_files import (
    SpillFileError,
    object_path,
    read_object_file,
    remove_object_file,
    scan_spill_directory,
    write_object_file,
)
from scaler.object_storage.store import (
    IMMEDIATE_WORK,
    AdoptSegment,
    ObjectStore,
    PayloadBuffer,
    ReadFile,
    RemoveFile,
    Residence,
    Segment,
    StoredObject,
    WriteFile,
    WriteSegment,
)
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Adopt,
    Delete,
    DeleteOwner,
    Get,
    GetMapped,
    MappedSize,
    ObjectSize,
    Put,
    SegmentDirectory,
    StorageHello,
    StorageOperation,
    StorageRequest,
    StorageStatus,
)

BUDGET = 48
SEGMENT_FROM = 8  #: objects of this many bytes and more are segment files
PEER = b"scheduler-peer"
OBJECT_IDS = [b"object-a", b"object-b", b"object-c", bytes(70)]  # the last one has a hashed file name
OWNERS = [b"Client|alice", b"Client|bob"]
FRAMES = st.lists(st.binary(max_size=24), max_size=4).map(tuple)

Frames = tuple[bytes, ...]


@dataclass(frozen=True)
class _Put:
    object_id: bytes
    frames: Frames
    version: int  #: of its object id when it was put: an answer to an older put changes nothing


@dataclass(frozen=True)
class _Get:
    object_id: bytes
    expected: Frames | None  #: what it must be answered with: the object as it was when asked, or not found
    mapped: bool = False  #: a getMapped


def _unused(*_: object) -> None:
    raise AssertionError("the harness calls the worker's steps itself")


def _request(request_id: int, operation: StorageOperation) -> bytes:
    return encode_storage_request(StorageRequest(request_id, operation))


class StoreHistories(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="scaler-store-property-")
        self.segments = tempfile.mkdtemp(prefix="scaler-store-property-segments-")
        self.worker = DiskWorker(self.directory, _unused, _unused, self.segments, _unused)
        self.adopts = 0
        #: object id -> the frames of the last put answered OK (None: none, or deleted since)
        self.current: dict[bytes, Frames | None] = dict.fromkeys(OBJECT_IDS)
        #: object ids whose current object is in a spill file (a put whose write failed is kept in memory only)
        self.durable: set[bytes] = set()
        #: object id -> every frames put under it since the last restart found it settled (what a crash may bring back)
        self.history: dict[bytes, set[Frames]] = {object_id: set() for object_id in OBJECT_IDS}
        self.version = dict.fromkeys(OBJECT_IDS, 0)
        #: object id -> the frames of a segment file the last restart took with no spill file of it (a put placed and
        #: not answered: as a put waiting for its answer, a stop may leave its spill file even if it is deleted since)
        self.taken: dict[bytes, Frames] = {}
        self.puts: dict[int, _Put] = {}
        self.gets: dict[int, _Get] = {}
        self.next_request = 1
        self._start()

    def teardown(self) -> None:
        self.worker.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        shutil.rmtree(self.segments, ignore_errors=True)

    # ------------------------------------------------------------ the server

    def _start(self, crashed: bool = False) -> None:
        scan = scan_spill_directory(self.directory)
        # files are never torn here; a crash may leave a deleted object's file beside its newer one
        assert all(crashed and why.startswith("superseded") for _, why in scan.discarded), scan.discarded
        store = ObjectStore(
            BUDGET,
            spills=True,
            first_generation=max((f.generation for f in scan.found), default=0) + 1,
            segment_from_bytes=SEGMENT_FROM,
        )
        for found in scan.found:
            store.restore(found.object_id, found.owner_id, found.total_bytes, found.name, found.generation)
        os.makedirs(self.segments, exist_ok=True)
        adopt_segments(store, self.segments, scan_segment_directory(self.segments))
        self.service = StorageService(store, segment_directory=SegmentDirectory(self.segments, "boot", 1, 1, True))
        assert self.service.handle(PEER, _request(0, StorageHello(PROTOCOL_VERSION, "3.11.0", "scheduler")), [])
        self.writes: list[tuple[WriteFile, list[memoryview] | None] | RemoveFile] = []  #: in order, on one thread
        self.reads: list[ReadFile] = []  #: in any order
        self.segment_writes: list[WriteSegment] = []  #: in order, on a thread of their own
        self.puts.clear()
        self.gets.clear()

    def _take_work(self) -> list[Reply]:
        """What the shell does with the store's work: reads, spill writes and segment writes queued for their threads
        (a spill write from a segment file maps it now, as `DiskWorker.run` does), the rest carried out at once (before
        any answer leaves: `_answered` takes the work first). Returns the answers of the adopts carried out."""
        replies: list[Reply] = []
        while work := self.service.take_work():
            for item in work:
                if isinstance(item, ReadFile):
                    self.reads.append(item)
                elif isinstance(item, WriteFile):
                    self.writes.append((item, self.worker._spill_source(item)))
                elif isinstance(item, RemoveFile):
                    self.writes.append(item)
                elif isinstance(item, WriteSegment):
                    self.segment_writes.append(item)
                else:
                    assert isinstance(item, IMMEDIATE_WORK)
                    refused = self.worker.carry_out_at_once(item)
                    if isinstance(item, AdoptSegment):
                        replies.extend(self.service.adopted(item, refused))
        return replies

    def _send(
        self, operation: StorageOperation, payload: Sequence[bytes] = (), pending: _Put | _Get | None = None
    ) -> Reply | None:
        """Send a request; `pending` is what its answer is checked against (registered first: the answer of an adopt
        comes from the work the request calls for). Returns its answer when it was not answered at once."""
        request_id = self.next_request
        self.next_request += 1
        if isinstance(pending, _Put):
            self.puts[request_id] = pending
        elif isinstance(pending, _Get):
            self.gets[request_id] = pending
        answer = self.service.handle(PEER, _request(request_id, operation), list(payload))
        if pending is not None:
            self._answered([] if answer is None else [Reply(PEER, answer)])
            return None
        self._answered([])  # the work a delete calls for is carried out before it is answered
        return None if answer is None else Reply(PEER, answer)

    def _answered(self, replies: Sequence[Reply]) -> None:
        """Answers as the shell sends them: after the work that led to them was carried out (a segment file placed
        before an answer names it)."""
        replies = [*replies, *self._take_work()]
        for reply in replies:
            request_id, status = reply.answer.reply.request_id, reply.answer.reply.status
            if request_id in self.puts:
                put = self.puts.pop(request_id)
                if put.version == self.version[put.object_id]:
                    assert status in (StorageStatus.OK, StorageStatus.FULL), reply
                    self.current[put.object_id] = put.frames if status is StorageStatus.OK else None
                    stored = self._stored(put.object_id)
                    if stored is not None and stored.residence is not Residence.MEMORY:
                        self.durable.add(put.object_id)
            else:
                self._check_get(self.gets.pop(request_id), reply)

    def _stored(self, object_id: bytes) -> StoredObject | None:
        """The object as the store holds it, without touching its recency as a get would."""
        return self.service.store._objects.get(object_id)

    def _check_get(self, get: _Get, reply: Reply) -> None:
        """A get's answer, as the peer reads it: the frames sent, the segment file the shell sends, or for a
        `mapped` answer the segment file the peer maps by the object's name (at once: the file is in place when the
        answer leaves)."""
        status = reply.answer.reply.status
        if get.expected is None:
            assert status is StorageStatus.NOT_FOUND, reply
            return
        assert status is StorageStatus.OK, (get, reply.answer.reply)
        size = sum(map(len, get.expected))
        if isinstance(reply.answer.reply.value, MappedSize):
            assert get.mapped and reply.answer.reply.value == MappedSize(size)
            frames = map_segment(segment_path(self.segments, get.object_id), object_id=get.object_id).frames
        elif reply.answer.segment:
            assert reply.answer.segment == get.object_id and reply.answer.reply.value == ObjectSize(size)
            frames = map_segment(segment_path(self.segments, get.object_id), object_id=get.object_id).frames
        else:
            frames = list(reply.answer.payload)  # type: ignore[arg-type]
            assert reply.answer.reply.value == ObjectSize(size)
        assert tuple(bytes(frame) for frame in frames) == get.expected, get

    # ------------------------------------------------------------ requests

    @rule(object_id=st.sampled_from(OBJECT_IDS), owner=st.sampled_from(OWNERS), frames=FRAMES)
    def put(self, object_id: bytes, owner: bytes, frames: Frames) -> None:
        self.version[object_id] += 1
        self.durable.discard(object_id)
        self.history[object_id].add(frames)
        total = sum(map(len, frames))
        self._send(Put(ObjectID(object_id), owner, total), frames, _Put(object_id, frames, self.version[object_id]))

    @rule(object_id=st.sampled_from(OBJECT_IDS), owner=st.sampled_from(OWNERS), frames=FRAMES)
    def adopt(self, object_id: bytes, owner: bytes, frames: Frames) -> None:
        """A peer of the host writes the object's segment file and asks the server to adopt it."""
        self.version[object_id] += 1
        self.durable.discard(object_id)
        self.history[object_id].add(frames)
        self.adopts += 1
        name = f"peer-{self.adopts}.put"
        write_segment(os.path.join(self.segments, name), object_id, owner, "", frames)
        adopt = Adopt(ObjectID(object_id), owner, name, sum(map(len, frames)))
        self._send(adopt, (), _Put(object_id, frames, self.version[object_id]))

    @rule(object_id=st.sampled_from(OBJECT_IDS), mapped=st.booleans())
    def get(self, object_id: bytes, mapped: bool) -> None:
        stored = self._stored(object_id)
        # a put not answered yet is in memory, and a get gives it: what is stored now is the newest put's
        expected = None if stored is None else self._newest_put(object_id)
        self._send((GetMapped if mapped else Get)(ObjectID(object_id)), (), _Get(object_id, expected, mapped))

    def _newest_put(self, object_id: bytes) -> Frames | None:
        waiting = [put for put in self.puts.values() if put.object_id == object_id]
        newest = max(waiting, key=lambda put: put.version, default=None)
        if newest is not None and newest.version == self.version[object_id]:
            return newest.frames
        return self.current[object_id]

    @rule(object_ids=st.lists(st.sampled_from(OBJECT_IDS), min_size=1, max_size=2, unique=True))
    def delete(self, object_ids: list[bytes]) -> None:
        for object_id in object_ids:
            self.version[object_id] += 1
            self.current[object_id] = None
            self.durable.discard(object_id)
        reply = self._send(Delete(tuple(ObjectID(object_id) for object_id in object_ids)))
        assert reply is not None and reply.answer.reply.status is StorageStatus.OK

    @rule(owner=st.sampled_from(OWNERS))
    def delete_owner(self, owner: bytes) -> None:
        for object_id in OBJECT_IDS:
            stored = self._stored(object_id)
            if stored is not None and stored.owner_id == owner:
                self.version[object_id] += 1
                self.current[object_id] = None
                self.durable.discard(object_id)
        reply = self._send(DeleteOwner(owner))
        assert reply is not None and reply.answer.reply.status is StorageStatus.OK

    # ------------------------------------------------------------ the disk

    @precondition(lambda self: self.writes)
    @rule(fails=st.booleans())
    def write_thread_does_one(self, fails: bool) -> None:
        work = self.writes.pop(0)
        if isinstance(work, RemoveFile):
            remove_object_file(self.directory, work.object_id, work.generation)
            return
        item, buffers = work
        error = "No space left on device" if fails or buffers is None else None
        if error is None:
            self._write_spill_file(work)
        self._answered(self.service.write_finished(item.object_id, item.generation, error))

    def _write_spill_file(self, work: tuple[WriteFile, list[memoryview] | None]) -> None:
        item, buffers = work
        assert buffers is not None
        write_object_file(self.directory, item.object_id, item.generation, item.owner_id, item.name, buffers)

    @precondition(lambda self: self.segment_writes)
    @rule(fails=st.booleans())
    def segment_thread_does_one(self, fails: bool) -> None:
        work = self.segment_writes.pop(0)
        if not fails:
            self.worker._write_segment(work)
        error = "No space left on device" if fails else None
        self._answered(self.service.segment_written(work.object_id, work.generation, error))

    @precondition(lambda self: self.reads)
    @rule(data=st.data())
    def read_thread_does_one(self, data: st.DataObject) -> None:
        work = self.reads.pop(data.draw(st.integers(0, len(self.reads) - 1), label="read"))
        frames: list[PayloadBuffer] | None
        in_segment = False
        try:
            read, in_segment = self.worker._read_file(work)
            frames, problem = list(read), ""
        except (SpillFileError, OSError) as error:
            frames, problem = None, str(error)
        self._answered(self.service.read_finished(work.object_id, work.generation, frames, problem, in_segment))

    # ------------------------------------------------------------ restarts

    @rule(write_under_way_finishes=st.booleans())
    def stop_gracefully(self, write_under_way_finishes: bool) -> None:
        """`serve`'s end: the write under way finishes, the removals queued and those that waited for reads are done,
        the rest is dropped (`ObjectStore.abandon_reads`, `DiskWorker.close`)."""
        for index, work in enumerate(self.writes):
            if isinstance(work, RemoveFile):
                remove_object_file(self.directory, work.object_id, work.generation)
            elif index == 0 and write_under_way_finishes and work[1] is not None:
                self._write_spill_file(work)
        for removal in self.service.store.abandon_reads():  # `serve` hands them to the closing disk worker
            remove_object_file(self.directory, removal.object_id, removal.generation)
        shutil.rmtree(self.segments)  # `serve` removes the segment directory: objects in memory go with the server
        self._restart(crashed=False)

    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """SIGKILL: the write thread got only a prefix of its queue done."""
        done = data.draw(st.integers(0, len(self.writes)), label="done before the crash")
        for work in self.writes[:done]:
            if isinstance(work, RemoveFile):
                remove_object_file(self.directory, work.object_id, work.generation)
            elif work[1] is not None:
                self._write_spill_file(work)
        segments_done = data.draw(st.integers(0, len(self.segment_writes)), label="segments written before the crash")
        for segment_work in self.segment_writes[:segments_done]:  # temporary files, never renamed into place
            self.worker._write_segment(segment_work)
        self._restart(crashed=True)

    def _restart(self, crashed: bool) -> None:
        waiting = {
            object_id: {p.frames for p in self.puts.values() if p.object_id == object_id} for object_id in OBJECT_IDS
        }
        self._start(crashed)
        for object_id in OBJECT_IDS:
            stored = self._stored(object_id)
            found = None if stored is None else self._file_frames(object_id, stored)
            acknowledged = self.current[object_id]
            if acknowledged is not None and object_id in self.durable:  # answered and written: back, as it was
                assert found == acknowledged, (object_id, found, acknowledged)
            elif found is not None:
                # a put not answered (its write may have been done; a segment file the last restart took is one), an
                # object kept in memory only (its older file was removed before the restart, or not after a crash), or
                # after a crash a deleted object's file
                allowed = waiting[object_id] | ({acknowledged} if acknowledged is not None else set())
                if object_id in self.taken:
                    allowed.add(self.taken[object_id])
                if crashed:
                    allowed |= self.history[object_id]
                assert found in allowed, (object_id, found, allowed)
            self.current[object_id] = found
            self.taken.pop(object_id, None)
            if found is not None and stored is not None and stored.residence is Residence.WRITING:
                self.taken[object_id] = found
                self.durable.discard(object_id)
            elif found is not None:
                self.durable.add(object_id)
            self.history[object_id] = set() if found is None else {found}
            self.version[object_id] += 1

    def _file_frames(self, object_id: bytes, stored: StoredObject) -> Frames:
        """What a restarted server found of the object: its spill file, and its segment file when it adopted one,
        which must hold the same frames; or, with no spill file of it, its segment file (written through now)."""
        if stored.residence is Residence.WRITING:
            assert stored.segment is Segment.READY, stored
            mapped = map_segment(segment_path(self.segments, object_id), object_id=object_id).frames
            return tuple(bytes(frame) for frame in mapped)
        assert stored.residence in (Residence.DISK, Residence.MEMORY_AND_DISK)
        frames = read_object_file(self.directory, object_id, stored.generation, stored.total_bytes)
        found = tuple(bytes(frame) for frame in frames)
        if stored.segment is Segment.READY:
            mapped = map_segment(segment_path(self.segments, object_id), object_id=object_id).frames
            assert tuple(bytes(frame) for frame in mapped) == found, object_id
        return found

    # ------------------------------------------------------------ invariants

    @invariant()
    def the_accounting_and_the_budget_hold(self) -> None:
        store = self.service.store
        objects: dict[bytes, StoredObject] = store._objects  # the table itself: what the invariants are about
        in_memory = [stored for stored in objects.values() if stored.in_memory]
        on_disk = [o for o in objects.values() if o.residence in (Residence.MEMORY_AND_DISK, Residence.DISK)]
        assert store.info().total_bytes == sum(stored.total_bytes for stored in objects.values())
        assert store.memory_bytes == sum(stored.total_bytes for stored in in_memory)
        assert store.disk_bytes == sum(stored.total_bytes for stored in on_disk)
        evictable = {
            i
            for i, stored in objects.items()
            if stored.residence is Residence.MEMORY_AND_DISK and stored.segment is not Segment.WRITING
        }
        assert set(store._evictable) == evictable
        assert store.memory_bytes <= BUDGET or not evictable, "memory over the budget with objects it could drop"
        for object_id, stored in objects.items():
            if stored.residence in (Residence.MEMORY_AND_DISK, Residence.DISK):
                assert os.path.exists(object_path(self.directory, object_id, stored.generation)), object_id

    @invariant()
    def a_segment_file_is_there_exactly_while_the_store_holds_it_and_holds_the_newest_put(self) -> None:
        objects = self.service.store._objects
        for object_id in OBJECT_IDS:
            stored = objects.get(object_id)
            path = segment_path(self.segments, object_id)
            held = stored is not None and stored.segment is Segment.READY
            assert os.path.exists(path) == held, (object_id, stored)
            if held:
                frames = map_segment(path, object_id=object_id).frames
                assert tuple(bytes(frame) for frame in frames) == self._newest_put(object_id), object_id

    @invariant()
    def an_idle_segment_directory_holds_only_the_files_of_the_objects_held_there(self) -> None:
        if self.segment_writes or self.reads:
            return
        objects = self.service.store._objects
        held = [object_id for object_id, stored in objects.items() if stored.segment is Segment.READY]
        expected = {os.path.basename(segment_path(self.segments, object_id)) for object_id in held}
        assert {name for name in os.listdir(self.segments) if not name.endswith(".put")} == expected

    @invariant()
    def an_idle_directory_holds_exactly_the_files_of_the_objects_on_disk(self) -> None:
        if self.writes or self.reads:
            return
        objects = self.service.store._objects
        expected = {
            os.path.basename(object_path(self.directory, object_id, stored.generation))
            for object_id, stored in objects.items()
            if stored.residence in (Residence.MEMORY_AND_DISK, Residence.DISK)
        }
        assert {name for name in os.listdir(self.directory) if name != ".lock"} == expected


TestStoreHistories = StoreHistories.TestCase
TestStoreHistories.settings = settings(max_examples=100, stateful_step_count=40, deadline=None, database=None)
