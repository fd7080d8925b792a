"""An adopt sent again after the server already renamed its `.put` file keeps the object (issue 40).

A peer of the server's host writes an object's segment file as `<name>.put` and asks the server to adopt it; a request
whose answer was lost (the connection dropped, the server restarted) is sent again (client_core rule 9). By then the
server renamed the file into place, and the object may have left its segment file (spilled and evicted, or restored
from its spill file by a server started again). The store plays the service as the server's shell does, with the real
disk worker and files in temporary directories.

Checked by hand with the mechanism off (`ObjectStore.adopt` without its held-object branch, as on main): both tests
fail: the request sent again is refused ("peer-1.put in the segment directory: No such file or directory"), and the
store drops the object with it (its spill file removed by the new adopt before the file was looked at). And without
the removal of the replaced object's segment file when an adopt is refused (`ObjectStore.adopted`),
`test_a_refused_adopt_leaves_no_file_of_the_object_it_replaced` fails: the file stays, named after an object the store
no longer holds (a processor mapping it by name would read a deleted object). With `ObjectStore.restore_segment`
dropping every segment file when there is a spill directory (as before it took those of objects no spill file has),
`test_an_object_adopted_when_the_server_was_killed_before_its_spill_file_is_found_by_the_successor` fails: the
reader that comes first is answered `NOT_FOUND`, the failure of `test_objects_read_back.py`'s
`[nested-result-restarted]` under load (a task's result announced while written, the storage killed mid-write).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.segment_files import scan_segment_directory, segment_path, write_segment
from scaler.object_storage.server import adopt_segments
from scaler.object_storage.service import Reply, StorageService
from scaler.object_storage.spill_files import read_object_file, remove_object_file, scan_spill_directory
from scaler.object_storage.store import (
    IMMEDIATE_WORK,
    AdoptSegment,
    ObjectStore,
    ReadFile,
    RemoveFile,
    Residence,
    Segment,
    WriteFile,
    WriteSegment,
)
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Adopt,
    Get,
    ObjectSize,
    Put,
    SegmentDirectory,
    StorageHello,
    StorageOperation,
    StorageRequest,
    StorageStatus,
)

PEER = b"client-peer"
OWNER = b"Client|alice"
OBJECT = ObjectID(b"object-a")
FRAMES = (b"x" * 40, b"y" * 24)
BUDGET = 100


def _unused(*_: object) -> None:
    raise AssertionError("the test carries out the worker's steps itself")


class Shell:
    """The server's shell, played synchronously: every piece of work carried out at once, in order."""

    def __init__(self, spill: Path, segments: Path) -> None:
        self.spill, self.segments = str(spill), str(segments)
        self.worker = DiskWorker(self.spill, _unused, _unused, self.segments, _unused)
        scan = scan_spill_directory(self.spill)
        store = ObjectStore(
            BUDGET, spills=True, first_generation=max((f.generation for f in scan.found), default=0) + 1,
            segment_from_bytes=8,
        )  # fmt: skip
        for found in scan.found:
            store.restore(found.object_id, found.owner_id, found.total_bytes, found.name, found.generation)
        adopt_segments(store, self.segments, scan_segment_directory(self.segments))
        self.service = StorageService(store, segment_directory=SegmentDirectory(self.segments, "boot", 1, 1, True))
        self.next_request = 1
        hello = StorageHello(PROTOCOL_VERSION, "3.11.0", "client", owner_id=OWNER)
        assert self.call(hello).answer.reply.status is StorageStatus.OK

    def call(self, operation: StorageOperation, payload: Sequence[bytes] = ()) -> Reply:
        request_id = self.next_request
        self.next_request += 1
        request = encode_storage_request(StorageRequest(request_id, operation))
        answer = self.service.handle(PEER, request, list(payload))
        replies = ([] if answer is None else [Reply(PEER, answer)]) + self._work()
        mine = [reply for reply in replies if reply.answer.reply.request_id == request_id]
        assert len(mine) == 1, replies
        return mine[0]

    def _work(self) -> list[Reply]:
        replies: list[Reply] = []
        while work := self.service.take_work():
            for item in work:
                if isinstance(item, WriteFile):
                    source = self.worker._spill_source(item)
                    assert source is not None
                    self.worker._write(item, source)
                    replies += self.service.write_finished(item.object_id, item.generation, None)
                elif isinstance(item, RemoveFile):
                    remove_object_file(self.spill, item.object_id, item.generation)
                elif isinstance(item, WriteSegment):
                    self.worker._write_segment(item)
                    replies += self.service.segment_written(item.object_id, item.generation, None)
                elif isinstance(item, ReadFile):
                    frames, in_segment = self.worker._read_file(item)
                    replies += self.service.read_finished(item.object_id, item.generation, frames, "", in_segment)
                else:
                    assert isinstance(item, IMMEDIATE_WORK), item
                    outcome = self.worker.carry_out_at_once(item)
                    if isinstance(item, AdoptSegment):
                        replies += self.service.adopted(item, outcome)
        return replies

    def crash_after_rename(self, operation: StorageOperation) -> None:
        """Send a request, carry out the work the server does at once (an adopt's rename into place), then crash: the
        spill file it queued is never written, and no answer leaves."""
        request_id = self.next_request
        self.next_request += 1
        assert self.service.handle(PEER, encode_storage_request(StorageRequest(request_id, operation)), []) is None
        for item in self.service.take_work():
            if isinstance(item, IMMEDIATE_WORK):
                self.worker.carry_out_at_once(item)
        self.close()

    def get(self) -> bytes | None:
        reply = self.call(Get(OBJECT))
        if reply.answer.reply.status is StorageStatus.NOT_FOUND:
            return None
        assert reply.answer.reply.status is StorageStatus.OK, reply
        assert reply.answer.reply.value == ObjectSize(sum(map(len, FRAMES)))
        if reply.answer.segment:
            frames = self.worker._spill_source(WriteFile(OBJECT, 0, OWNER, "", None))
            assert frames is not None
            return b"".join(bytes(frame) for frame in frames)
        return b"".join(bytes(frame) for frame in reply.answer.payload)  # type: ignore[arg-type]

    def close(self) -> None:
        self.worker.close()


def _adopt_request(segments: Path) -> Adopt:
    """A peer writes the object's file for adoption; the request it sends (and sends again)."""
    write_segment(os.path.join(segments, "peer-1.put"), OBJECT, OWNER, "argument", FRAMES)
    return Adopt(OBJECT, OWNER, "peer-1.put", sum(map(len, FRAMES)), "argument")


def test_an_adopt_sent_again_to_a_restarted_server_keeps_the_object_it_restored(tmp_path: Path) -> None:
    spill, segments = tmp_path / "spill", tmp_path / "segments"
    spill.mkdir()
    segments.mkdir()
    shell = Shell(spill, segments)
    adopt = _adopt_request(segments)
    assert shell.call(adopt).answer.reply.status is StorageStatus.OK
    assert not (segments / "peer-1.put").exists()
    shell.close()
    # the server crashed before the answer reached the peer; its successor restores the object from its spill file
    # (with a spill directory the segment files of objects in spill files are dropped: the spill files are the truth)
    shell = Shell(spill, segments)
    restored = shell.service.store._objects[OBJECT]
    assert restored.residence is Residence.DISK and restored.segment is not Segment.READY
    again = shell.call(adopt)
    assert again.answer.reply.status is StorageStatus.OK, again.answer.reply
    assert shell.get() == b"".join(FRAMES)
    stored = shell.service.store._objects[OBJECT]
    assert read_object_file(shell.spill, OBJECT, stored.generation, stored.total_bytes)
    shell.close()


def test_an_adopt_sent_again_after_its_object_was_evicted_keeps_it(tmp_path: Path) -> None:
    spill, segments = tmp_path / "spill", tmp_path / "segments"
    spill.mkdir()
    segments.mkdir()
    shell = Shell(spill, segments)
    adopt = _adopt_request(segments)
    assert shell.call(adopt).answer.reply.status is StorageStatus.OK
    other = ObjectID(b"object-b")
    assert shell.call(Put(other, OWNER, BUDGET), [b"z" * BUDGET]).answer.reply.status is StorageStatus.OK
    evicted = shell.service.store._objects[OBJECT]
    assert evicted.residence is Residence.DISK and not os.path.exists(segment_path(shell.segments, OBJECT))
    again = shell.call(adopt)  # its answer was lost: sent again
    assert again.answer.reply.status is StorageStatus.OK, again.answer.reply
    assert shell.get() == b"".join(FRAMES)
    shell.close()


def test_a_refused_adopt_leaves_no_file_of_the_object_it_replaced(tmp_path: Path) -> None:
    spill, segments = tmp_path / "spill", tmp_path / "segments"
    spill.mkdir()
    segments.mkdir()
    shell = Shell(spill, segments)
    assert shell.call(Put(OBJECT, OWNER, 64), [b"p" * 64]).answer.reply.status is StorageStatus.OK
    assert os.path.exists(segment_path(shell.segments, OBJECT))
    refused = shell.call(Adopt(OBJECT, OWNER, "never-written.put", 32, ""))  # another size: not the object held
    assert refused.answer.reply.status is StorageStatus.BAD_REQUEST, refused.answer.reply
    assert shell.get() is None and not os.path.exists(segment_path(shell.segments, OBJECT))
    shell.close()


def test_an_object_adopted_when_the_server_was_killed_before_its_spill_file_is_found_by_the_successor(
    tmp_path: Path,
) -> None:
    """The adopt's file renamed into place, the server killed while its spill file was written (a task's result
    announced while written: its readers know of it already): the successor finds the whole file in the segment
    directory it takes over, and no spill file of the object. A reader that comes before the writer's adopt sent again
    reads it; the adopt sent again is answered, once the object is written through."""
    spill, segments = tmp_path / "spill", tmp_path / "segments"
    spill.mkdir()
    segments.mkdir()
    adopt = _adopt_request(segments)
    Shell(spill, segments).crash_after_rename(adopt)
    assert os.path.exists(segment_path(str(segments), OBJECT)) and not scan_spill_directory(str(spill)).found
    shell = Shell(spill, segments)
    assert shell.get() == b"".join(FRAMES)
    again = shell.call(adopt)
    assert again.answer.reply.status is StorageStatus.OK, again.answer.reply
    stored = shell.service.store._objects[OBJECT]
    assert read_object_file(shell.spill, OBJECT, stored.generation, stored.total_bytes)
    assert shell.get() == b"".join(FRAMES)
    shell.close()
