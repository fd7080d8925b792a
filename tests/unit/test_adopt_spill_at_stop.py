"""A server stopped (SIGTERM) with an adopt's spill write queued: the adopter's object is found by the successor.

An adopt is answered once its spill file is written (the store's `settled`), so a stop never drops the spill write of
an answered adopt. But the adopt's file was renamed into the server's segment directory, which a server that stops
removes: the adopter, unanswered, sends the adopt again to the successor and has no file to send. So the disk worker
writes, as it closes, the queued spill writes of objects held as segment files (an adopt's, one taken at start),
unless the object was deleted or replaced since; the writes of puts (their frames are their clients', sent again)
are still dropped. Real disk worker threads and files in temporary directories; the successor is played as in
test_adopt_sent_again.py.

Checked with the mechanism off (`DiskWorker._write` skipping every write once closing, as before): the first test
fails, the adopt sent again to the successor answered BAD_REQUEST ("peer-....put in the segment directory: No such
file or directory"). With `ObjectStore.spills_under_way` naming the writes of deleted objects too, the second fails
(the deleted object is found by the successor); with the worker writing the queued puts too, it fails on the put.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from scaler.object_storage import segment_directory
from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.segment_files import scan_segment_directory, segment_path, write_segment
from scaler.object_storage.server import adopt_segments, close_disk_worker
from scaler.object_storage.service import Reply, StorageService
from scaler.object_storage.spill_files import scan_spill_directory
from scaler.object_storage.store import IMMEDIATE_WORK, AdoptSegment, ObjectStore
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Adopt,
    Delete,
    Put,
    SegmentDirectory,
    StorageHello,
    StorageOperation,
    StorageRequest,
    StorageStatus,
)
from tests.unit.test_adopt_sent_again import FRAMES, OBJECT, OWNER, Shell

PEER = b"client-peer"
BUDGET = 1000


class StoppingServer:
    """The server's side up to its stop: requests handled by the service, its work carried out by a real disk worker
    whose spill write thread is held busy (a large write under way) until the worker closes."""

    def __init__(self, spill: Path, segments: Path) -> None:
        self.segments = str(segments)
        self.replies: list[Reply] = []
        self.worker = DiskWorker(str(spill), self._written, self._unused, self.segments, self._segment_written)
        store = ObjectStore(BUDGET, spills=True, segment_from_bytes=8)
        adopt_segments(store, self.segments, scan_segment_directory(self.segments))
        self.service = StorageService(store, segment_directory=SegmentDirectory(self.segments, "boot", 1, 1, True))
        self._next_request = 1
        self.call(StorageHello(PROTOCOL_VERSION, "3.11.0", "client", owner_id=OWNER))

    def hold_writes(self) -> threading.Event:
        """Keep the spill write thread busy until close begins (the write under way when SIGTERM comes)."""
        began = threading.Event()

        def write_under_way() -> None:
            began.set()
            while not self.worker._closing:
                threading.Event().wait(0.01)

        self.worker._writes.submit(write_under_way)
        assert began.wait(30)
        return began

    def call(self, operation: StorageOperation, payload: Sequence[bytes] = ()) -> int:
        request_id = self._next_request
        self._next_request += 1
        answer = self.service.handle(PEER, encode_storage_request(StorageRequest(request_id, operation)), list(payload))
        self._answered(([] if answer is None else [Reply(PEER, answer)]) + self._work())
        return request_id

    def answer(self, request_id: int) -> StorageStatus | None:
        statuses = [reply.answer.reply.status for reply in self.replies if reply.answer.reply.request_id == request_id]
        assert len(statuses) <= 1
        return statuses[0] if statuses else None

    def files(self) -> list[str]:
        return os.listdir(self.segments)

    def stop(self) -> None:
        """As serve() ends: the disk worker closes, then the segment directory is removed."""
        close_disk_worker(self.worker, self.service.store)
        segment_directory.remove_directory(self.segments)

    def _work(self) -> list[Reply]:
        replies: list[Reply] = []
        while work := self.service.take_work():
            for item in work:
                if not isinstance(item, IMMEDIATE_WORK):
                    self.worker.run([item])
                    continue
                outcome = self.worker.carry_out_at_once(item)
                if isinstance(item, AdoptSegment):
                    replies += self.service.adopted(item, outcome)
        return replies

    def _answered(self, replies: list[Reply]) -> None:
        self.replies += replies

    def _written(self, object_id: bytes, generation: int, error: str | None) -> None:
        self._answered(self.service.write_finished(object_id, generation, error) + self._work())

    def _segment_written(self, object_id: bytes, generation: int, error: str | None) -> None:
        self._answered(self.service.segment_written(object_id, generation, error) + self._work())

    @staticmethod
    def _unused(*_: object) -> None:
        raise AssertionError("nothing is read back here")


def _adopt_request(segments: Path, object_id: ObjectID = OBJECT) -> Adopt:
    name = f"peer-{object_id.hex()}.put"
    write_segment(os.path.join(segments, name), object_id, OWNER, "argument", FRAMES)
    return Adopt(object_id, OWNER, name, sum(map(len, FRAMES)), "argument")


def _directories(tmp_path: Path) -> tuple[Path, Path]:
    spill, segments = tmp_path / "spill", tmp_path / "segments"
    spill.mkdir()
    segments.mkdir()
    return spill, segments


@pytest.mark.timeout(60)
def test_an_adopt_whose_spill_write_was_queued_at_the_stop_is_kept_for_the_successor(tmp_path: Path) -> None:
    spill, segments = _directories(tmp_path)
    adopt = _adopt_request(segments)

    async def until_stopped() -> tuple[list[str], StorageStatus | None]:
        server = StoppingServer(spill, segments)
        server.hold_writes()
        request_id = server.call(adopt)
        in_directory = server.files()
        answered = server.answer(request_id)
        server.stop()
        return in_directory, answered

    in_directory, answered = asyncio.run(until_stopped())
    assert os.path.basename(segment_path(str(segments), OBJECT)) in in_directory  # renamed into place at once
    assert answered is None  # not answered before its spill file is written
    assert not segments.exists()
    segments.mkdir()  # the successor at the same address makes the directory again
    successor = Shell(spill, segments)
    again = successor.call(adopt)  # the adopter's request, unanswered, sent again
    assert again.answer.reply.status is StorageStatus.OK, again.answer.reply
    assert successor.get() == b"".join(FRAMES)
    successor.close()


@pytest.mark.timeout(60)
def test_the_stop_drops_the_queued_writes_of_puts_and_of_objects_deleted_since(tmp_path: Path) -> None:
    """A put's client sends it again with its frames; a deleted object must not be found again by the successor."""
    spill, segments = _directories(tmp_path)
    put_object, deleted = ObjectID(b"object-put"), ObjectID(b"object-deleted")

    async def until_stopped() -> None:
        server = StoppingServer(spill, segments)
        server.hold_writes()
        put = server.call(Put(put_object, OWNER, 4), [b"abcd"])
        adopted = server.call(_adopt_request(segments, deleted))
        server.call(Delete((deleted,)))
        assert server.answer(put) is None and server.answer(adopted) is None
        server.stop()

    asyncio.run(until_stopped())
    assert scan_spill_directory(str(spill)).found == []
