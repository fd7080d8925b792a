"""Readers follow an object while a peer of the server's host writes it (object_storage/followed_writes.py, issue 42).

The service is played as the server's shell plays it (the disk worker's renames carried out at once, pieces read from
the files in a temporary segment directory), with the writer's side written as `followed_put` writes it
(`SegmentWriter`): a getInParts gets its header at once and each piece once the writer said it is written, the last
only once the object is stored; other reads wait for the adopt; a write that ends badly (the writer gives up, stalls
or the object is deleted) answers every reader `notFound` naming why, and its late adopt is refused, so the object
never appears after its readers were told it would not.

Then the storage restarts: a writer that comes back re-begins the same object (rule 5) and a server that starts keeps
the writes its predecessor's peers began (rule 6); their readers get the object whole. The writer's table
(followed_rewrite.py) writes a lost write again, a bounded number of times, and never one the server ended.

Checked by hand with the mechanism off (`StorageService._get` without its branch for objects being written): every
test here fails, a read of an object being written being answered `notFound` at once. With rule 5 off
(`FollowedWrites.begin` refusing a known write), both restart tests whose writer comes back fail; with the table's
`(Step.LOST, True)` giving up, the table's test fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.followed_rewrite import MAX_REWRITES, Next, Step, after, failed_step
from scaler.object_storage.segment_files import SegmentWriter, map_segment, segment_path
from scaler.object_storage.service import Reply, StorageService
from scaler.object_storage.store import IMMEDIATE_WORK, AdoptSegment, ObjectStore
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    Adopt,
    Delete,
    Exists,
    Get,
    GetInParts,
    GetMapped,
    MappedSize,
    ObjectSize,
    Put,
    SegmentDirectory,
    StorageHello,
    StorageOperation,
    StorageRequest,
    StorageStatus,
    WriteBegin,
    WriteProgress,
)

WRITER, READER, STRANGER = b"processor-peer", b"client-peer", b"other-client-peer"
OWNER = b"Client|alice"
OBJECT = ObjectID(b"r" * 32)
MARKER = b"\x00scaler:raw-bytes"
PAYLOAD = os.urandom(3 * WIRE_PIECE_BYTES + 1000)  #: four pieces: three whole ones, then 1,000 bytes


def _unused(*_: object) -> None:
    raise AssertionError("the test carries out the worker's steps itself")


class Shell:
    """The server's shell, played synchronously; every reply kept, by peer."""

    def __init__(self, segments: Path) -> None:
        self.segments = str(segments)
        self.worker = DiskWorker(None, _unused, _unused, self.segments, _unused)
        store = ObjectStore(1 << 30)
        store.segments = True
        self.service = StorageService(store, segment_directory=SegmentDirectory(self.segments, "boot", 1, 1, True))
        self.replies: dict[bytes, list[tuple[StorageStatus, int, str, bytes | None]]] = {}
        self.values: dict[int, object] = {}  #: request id -> the value of its last reply
        self.request_id = 0
        for peer, role, owner in ((WRITER, "processor", b""), (READER, "client", OWNER), (STRANGER, "client", b"C|b")):
            self.call(peer, StorageHello(PROTOCOL_VERSION, "3.11.0", role, owner_id=owner))
        self.replies.clear()

    def call(self, peer: bytes, operation: StorageOperation, frames: list[bytes] | None = None) -> int:
        """Handle a request (with a put's payload `frames`); its id. What was sent to every peer is in `replies`."""
        self.request_id += 1
        request = encode_storage_request(StorageRequest(self.request_id, operation))
        answer = self.service.handle(peer, request, frames or [])
        self._send(([] if answer is None else [Reply(peer, answer)]) + self._work())
        return self.request_id

    def _work(self) -> list[Reply]:
        replies: list[Reply] = []
        while work := self.service.take_work():
            for item in work:
                assert isinstance(item, IMMEDIATE_WORK), item
                outcome = self.worker.carry_out_at_once(item)
                if isinstance(item, AdoptSegment):
                    replies += self.service.adopted(item, outcome)
        return replies

    def sweep(self) -> None:
        self.service.sweep_writes()
        self._send([])

    def _send(self, replies: list[Reply]) -> None:
        for reply in replies + self.service.take_outgoing():
            answer, piece = reply.answer, reply.answer.file_piece
            data = None
            if piece is not None:  # as the shell reads it
                with open(os.path.join(self.segments, piece.file_name), "rb") as file:
                    file.seek(piece.offset)
                    data = file.read(piece.length)
            elif answer.segment:  # as the shell maps it
                mapped = map_segment(segment_path(self.segments, answer.segment))
                data = b"".join(bytes(frame) for frame in mapped.frames)
            elif answer.payload:
                data = b"".join(bytes(frame) for frame in answer.payload)  # type: ignore[arg-type]
            entry = (answer.reply.status, answer.reply.request_id, answer.reply.reason, data)
            self.values[answer.reply.request_id] = answer.reply.value
            self.replies.setdefault(reply.peer, []).append(entry)

    def take(self, peer: bytes) -> list[tuple[StorageStatus, int, str, bytes | None]]:
        return self.replies.pop(peer, [])


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


def _begin(shell: Shell) -> SegmentWriter:
    """The writer's file (its header written), and its writeBegin, answered ok."""
    writer = SegmentWriter(os.path.join(shell.segments, "w.1-1.put"), OBJECT, OWNER, "result", [MARKER, PAYLOAD])
    frames = (len(MARKER), len(PAYLOAD))
    shell.call(WRITER, WriteBegin(OBJECT, OWNER, "w.1-1.put", sum(frames), frames, "result"))
    assert [status for status, *_ in shell.take(WRITER)] == [StorageStatus.OK]
    return writer


def _write(shell: Shell, writer: SegmentWriter, step: int) -> None:
    shell.call(WRITER, WriteProgress(OBJECT, writer.write_next(step)))
    assert [status for status, *_ in shell.take(WRITER)] == [StorageStatus.OK]


def _adopt(shell: Shell, writer: SegmentWriter) -> StorageStatus:
    writer.close()
    shell.call(WRITER, Adopt(OBJECT, OWNER, "w.1-1.put", writer.head.total_bytes, "result"))
    ((status, *_),) = shell.take(WRITER)
    return status


def test_a_reader_in_parts_gets_each_piece_once_written_and_the_last_once_stored(shell: Shell) -> None:
    writer = _begin(shell)
    asked = shell.call(READER, GetInParts(OBJECT))
    ((status, request_id, _, data),) = shell.take(READER)
    assert (status, request_id, data) == (StorageStatus.OK, asked, None), "the header at once, no payload"
    assert shell.values[asked] == ObjectSize(len(MARKER) + len(PAYLOAD))
    exists = shell.call(READER, Exists(OBJECT))
    assert shell.take(READER)[0][0] is StorageStatus.OK and shell.values[exists] is True, "announced: it exists"
    assert shell.service.store.get(OBJECT) is None, "not stored yet"
    _write(shell, writer, len(MARKER) + WIRE_PIECE_BYTES // 2)
    assert [data for *_, data in shell.take(READER)] == [MARKER], "only the pieces whose bytes are all written"
    _write(shell, writer, 3 * WIRE_PIECE_BYTES)
    parts = shell.take(READER)
    assert [len(data or b"") for *_, data in parts] == [WIRE_PIECE_BYTES] * 3
    assert [data for *_, data in shell.take(READER)] == []
    _write(shell, writer, WIRE_PIECE_BYTES)  # all written: the last piece still waits for the object to be stored
    assert shell.take(READER) == []
    assert _adopt(shell, writer) is StorageStatus.OK
    (last,) = shell.take(READER)
    assert last[0] is StorageStatus.OK and last[1] == asked
    assert b"".join(data or b"" for *_, data in [*parts, last]) == PAYLOAD
    exists = shell.call(READER, Exists(OBJECT))
    assert shell.values[exists] is True


def test_other_reads_wait_for_the_adopt_and_a_stranger_is_not_told_of_the_object(shell: Shell) -> None:
    writer = _begin(shell)
    got = shell.call(READER, Get(OBJECT))
    mapped = shell.call(READER, GetMapped(OBJECT))
    shell.call(STRANGER, GetInParts(OBJECT))
    assert [status for status, *_ in shell.take(STRANGER)] == [StorageStatus.NOT_FOUND]
    _write(shell, writer, len(MARKER) + len(PAYLOAD))
    assert shell.take(READER) == []
    assert _adopt(shell, writer) is StorageStatus.OK
    answers = {request_id: (status, data) for status, request_id, _, data in shell.take(READER)}
    assert answers[got] == (StorageStatus.OK, MARKER + PAYLOAD)
    assert answers[mapped][0] is StorageStatus.OK
    assert shell.values[mapped] == MappedSize(len(MARKER) + len(PAYLOAD)), "mapped: its segment file is in place"


@pytest.mark.parametrize("ending", ["gives up", "stalls", "deleted"])
def test_a_write_that_ends_badly_tells_every_reader_and_its_late_adopt_is_refused(shell: Shell, ending: str) -> None:
    writer = _begin(shell)
    shell.call(READER, GetInParts(OBJECT))
    shell.call(READER, Get(OBJECT))
    _write(shell, writer, len(MARKER) + WIRE_PIECE_BYTES)
    assert len(shell.take(READER)) == 3, "the header, the marker and a piece"
    if ending == "gives up":
        shell.call(WRITER, WriteProgress(OBJECT, 0, "the disk is full"))
        why = "the disk is full"
    elif ending == "stalls":
        shell.sweep()
        _write(shell, writer, 1)  # heard of between two sweeps: it lives on
        shell.sweep()
        assert shell.take(READER) == []
        shell.sweep()
        why = "stopped mid-write"
    else:
        deleted = shell.call(READER, Delete((OBJECT,)))
        why = "deleted while it was being written"
        assert shell.values[deleted] == 1, "the object being written counts as deleted: it was announced"
    told = [entry for entry in shell.take(READER) if entry[0] is not StorageStatus.OK]
    assert len(told) == 2 and all(status is StorageStatus.NOT_FOUND and why in reason for status, _, reason, _ in told)
    shell.take(WRITER)
    writer.write_next(len(PAYLOAD))
    assert _adopt(shell, writer) is StorageStatus.NOT_FOUND, "the object never appears after its readers were told"
    assert shell.service.store.get(OBJECT) is None
    assert not os.path.exists(os.path.join(shell.segments, "w.1-1.put")), "its file discarded"


def _read_whole(replies: list[tuple[StorageStatus, int, str, bytes | None]], request_id: int) -> bytes:
    """A reader's bytes of one request, as it joins them (the header of a read in parts carries none)."""
    assert all(status is StorageStatus.OK for status, rid, _, _ in replies if rid == request_id), replies
    return b"".join(data or b"" for _, rid, _, data in replies if rid == request_id)


def test_an_object_being_written_exists_for_its_owner_and_not_for_a_stranger(shell: Shell) -> None:
    """Announced while it is written: `exists` says yes (a read waits for it), to whoever may read it."""
    _begin(shell)
    mine, theirs = shell.call(READER, Exists(OBJECT)), shell.call(STRANGER, Exists(OBJECT))
    assert (shell.values[mine], shell.values[theirs]) == (True, False)


def test_a_writer_that_comes_back_writes_the_object_again_and_its_readers_get_it_whole(shell: Shell) -> None:
    """Rule 5: the writer's connection was replaced mid-write (another peer), and it begins the same object again in
    a new file: the write goes on under it, a follower keeps the pieces it got and gets the rest, a waiting read its
    answer. Without rule 5 the second writeBegin is refused ("being written already")."""
    writer = _begin(shell)
    followed, waited = shell.call(READER, GetInParts(OBJECT)), shell.call(READER, Get(OBJECT))
    _write(shell, writer, len(MARKER) + WIRE_PIECE_BYTES)
    early = shell.take(READER)
    assert len(early) == 3, "the header, the marker and a piece"
    writer.discard()
    again = b"processor-peer-again"
    shell.call(again, StorageHello(PROTOCOL_VERSION, "3.11.0", "processor"))
    rewriter = SegmentWriter(os.path.join(shell.segments, "w.1-2.put"), OBJECT, OWNER, "result", [MARKER, PAYLOAD])
    frames = (len(MARKER), len(PAYLOAD))
    shell.call(again, WriteBegin(OBJECT, OWNER, "w.1-2.put", sum(frames), frames, "result"))
    shell.call(again, WriteProgress(OBJECT, rewriter.write_next(len(MARKER) + len(PAYLOAD))))
    rewriter.close()
    shell.call(again, Adopt(OBJECT, OWNER, "w.1-2.put", sum(frames), "result"))
    assert [status for status, *_ in shell.take(again)] == [StorageStatus.OK] * 4
    replies = early + shell.take(READER)
    assert _read_whole(replies, followed) == MARKER + PAYLOAD
    assert _read_whole(replies, waited) == MARKER + PAYLOAD


@pytest.mark.parametrize("comes_back", [True, False], ids=["its writer comes back", "nobody comes"])
def test_a_write_found_at_start_awaits_its_writer(shell: Shell, comes_back: bool) -> None:
    """Rule 6: a server that starts knows the writes its predecessor's peers began (their `.put` files): a read of
    such an object waits for it (without rule 6: `notFound` at once), and gets it once its writer wrote it again; or,
    when nobody comes, the stall of rule 4 tells the reader."""
    frames = (len(MARKER), len(PAYLOAD))
    left = WriteBegin(OBJECT, OWNER, "w.0-1.put", sum(frames), frames, "result")
    assert shell.service.recover_writes([left]) == 1
    waited, followed = shell.call(READER, Get(OBJECT)), shell.call(READER, GetInParts(OBJECT))
    replies = shell.take(READER)
    assert [status for status, *_ in replies] == [StorageStatus.OK], "only the header of the read in parts"
    if not comes_back:
        shell.sweep()
        shell.sweep()
        told = shell.take(READER)
        assert {request_id for _, request_id, _, _ in told} == {waited, followed}
        assert all(status is StorageStatus.NOT_FOUND and "stopped mid-write" in why for status, _, why, _ in told)
        return
    writer = SegmentWriter(os.path.join(shell.segments, "w.1-1.put"), OBJECT, OWNER, "result", [MARKER, PAYLOAD])
    shell.call(WRITER, WriteBegin(OBJECT, OWNER, "w.1-1.put", sum(frames), frames, "result"))
    assert [status for status, *_ in shell.take(WRITER)] == [StorageStatus.OK]
    _write(shell, writer, len(MARKER) + len(PAYLOAD))
    assert _adopt(shell, writer) is StorageStatus.OK
    replies += shell.take(READER)
    assert _read_whole(replies, waited) == MARKER + PAYLOAD
    assert _read_whole(replies, followed) == MARKER + PAYLOAD


def test_the_writers_table_writes_a_lost_write_again_a_bounded_number_of_times_and_never_a_refused_one() -> None:
    """followed_rewrite.py: a write lost with a restarted server is written again (at most MAX_REWRITES times); one
    the server ended (a delete, a stall) or refused is not: a delete during a write wins."""
    assert failed_step(greeted_again=True) is Step.LOST
    assert failed_step(greeted_again=False) is Step.REFUSED
    assert [after(Step.LOST, done) for done in range(MAX_REWRITES + 1)] == [Next.REWRITE] * MAX_REWRITES + [
        Next.GIVE_UP
    ]
    assert all(after(Step.REFUSED, done) is Next.GIVE_UP for done in range(MAX_REWRITES + 1))
    assert after(Step.STORED, 0) is Next.DONE and after(Step.FILE_FAILED, 0) is Next.TELL_AND_GIVE_UP


def test_a_delete_counts_an_object_once_when_it_is_stored_and_being_written(shell: Shell) -> None:
    """Content-addressed results: a nested task's parent returns its child's result, so the same object can be put
    whole while a followed write of it is under way. A delete then counts the object once. Checked off: counting
    the ended write and the stored object both made the delete say 2 (test_objects_read_back's
    nested-result-deleted case, now and then, with lent processors)."""
    writer = _begin(shell)
    shell.service.store.segments = False  # the put is held in memory (the shell plays no thread's segment write)
    put = shell.call(READER, Put(OBJECT, OWNER, len(MARKER) + len(PAYLOAD), "result"), [MARKER, PAYLOAD])
    assert (put, StorageStatus.OK) in [(request_id, status) for status, request_id, *_ in shell.take(READER)]
    writing = shell.service.writes.get(OBJECT)
    assert shell.service.store.get(OBJECT) is not None and writing is not None and not writing.ended, "both"
    deleted = shell.call(READER, Delete((OBJECT,)))
    assert shell.values[deleted] == 1
    assert shell.service.store.get(OBJECT) is None
    writer.close()
