"""Objects being written, which readers may follow (pure): the server's side of writeBegin and writeProgress.

A peer on the server's host that writes a large object's segment file (a processor writing a task's result) may say so
before it writes the payload (`writeBegin`: the file's header is written and its size set), tell how far it got
(`writeProgress`) and then ask for the file's adoption as any writer does. Meanwhile the object is *being written*:
not stored yet (nothing counts it), but announced (`exists` says yes), and a reader that asks for it waits instead
of hearing "not stored":

1. A getInParts of an object over one piece is answered at once with its header (the frames' lengths are known) and
   then, as the writer's progress reports come, each piece once all of its bytes are written: the shell reads it from
   the file (`StorageAnswer.file_piece`). The reader copies the pieces while the rest is being written.
2. Any other read of it (get, getMapped, getInParts of a small one) waits for the adoption and is then answered as if
   it had come after it.
3. The object counts as stored when its adopt is answered ok, not before: what is sent from the file before then is
   the bytes the writer wrote, in their place; a reader is sent a piece only once the writer said all of it is
   written, and the last pieces only once the object is stored (so a reader never finishes reading an object that
   was not stored).
4. The write ends badly when the writer gives up (`writeProgress.failed`), its adopt is refused, a delete (of it or of
   its owner's objects) comes first, or it stalls: no progress nor adopt between two sweeps (`sweep`; a writer that
   died). Every reader that waits or follows is then answered `notFound` naming why (a follower mid-answer gets it
   as its next part: client_core rule 4 fails the read), and a late adopt of it is refused (`notFound`) with its file
   discarded, so the object never appears after its readers were told it would not. A delete wins: the writer does
   not write it again (followed_rewrite.py), and a delete of it counts it as deleted.
5. A writer that comes back begins the same object again (a writeBegin of the same id, owner and frames, from another
   peer or file: its connection was replaced, or the server restarted, and it writes the object again whole from its
   own copy: followed_rewrite.py): the write goes on under the new writer and file from nothing written, its readers
   kept (pieces a follower was sent stay sent: they are the same bytes).
6. A server that starts takes the files written for adoption that its predecessor's peers left in the segment
   directory it takes over (`.put` files whose header is whole) as writes *awaiting their writer* (`recover`): a
   reader waits for such an object as for any write; its writer comes back with the adopt of that file (it had
   written it whole) or begins it again (rule 5); when neither comes, the stall of rule 4 ends it. (A server that
   is stopped first lets the writes under way finish while their writers are heard from: server.py.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.object_storage.segment_files import layout, segment_name
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    ObjectSize,
    StorageReply,
    StorageStatus,
    WriteBegin,
)


@dataclass(frozen=True, slots=True)
class FilePiece:
    """A piece of an object read from a file of the segment directory: its name there, the offset and the length."""

    file_name: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class WaitingRead:
    """A read that waits for the adoption (rule 2): answered then as a read of a stored object."""

    peer: bytes
    request_id: int
    mapped: bool
    in_parts: bool


@dataclass(slots=True)
class Writing:
    """One object being written."""

    begin: WriteBegin
    writer: bytes
    pieces: tuple[tuple[int, int], ...]  #: each wire piece's (offset in the file, length), in order
    ends: tuple[int, ...]  #: the payload bytes up to each piece's end
    written: int = 0  #: payload bytes the writer said are written
    sent: dict[tuple[bytes, int], int] = field(default_factory=dict)  #: follower -> pieces sent to it
    waiting: list[WaitingRead] = field(default_factory=list)
    progressed: bool = True  #: heard from its writer since the last sweep
    ended: str = ""  #: why the write ended badly (rule 4): it is only remembered to refuse its adopt

    @property
    def total(self) -> int:
        return self.begin.total_bytes


#: A reply to send (peer, the reply, the piece of a file that is its one payload frame, or None).
Outgoing = tuple[bytes, StorageReply, FilePiece | None]


def piece_spans(begin: WriteBegin) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...]]:
    """Where each wire piece of the object lies in its segment file, and the payload bytes up to each one's end: the
    pieces `wire_pieces` cuts the frames into (a frame over WIRE_PIECE_BYTES in pieces of that size, others whole)."""
    _, head = layout(begin.object_id, begin.owner_id, begin.name, begin.frame_bytes)
    spans: list[tuple[int, int]] = []
    ends: list[int] = []
    done = 0
    for offset, length in head.frames:
        if length <= WIRE_PIECE_BYTES:
            spans.append((offset, length))
            done += length
            ends.append(done)
            continue
        for start in range(0, length, WIRE_PIECE_BYTES):
            size = min(WIRE_PIECE_BYTES, length - start)
            spans.append((offset + start, size))
            done += size
            ends.append(done)
    return tuple(spans), tuple(ends)


class FollowedWrites:
    """The objects being written (module docstring), by id."""

    def __init__(self) -> None:
        self._writing: dict[bytes, Writing] = {}
        #: writeBegins, progress reports and adoptions heard so far (a stopping server waits while they come)
        self.heard = 0

    def __contains__(self, object_id: bytes) -> bool:
        """Being written now (not ended)."""
        writing = self._writing.get(object_id)
        return writing is not None and not writing.ended

    def get(self, object_id: bytes) -> Writing | None:
        """The object's write, whether under way or ended badly (None: none is remembered)."""
        return self._writing.get(object_id)

    def begin(self, begin: WriteBegin, writer: bytes) -> str | None:
        """Register a write, or a writer that comes back to one (rule 5); why it cannot be (None: registered)."""
        if sum(begin.frame_bytes) != begin.total_bytes:
            return f"writeBegin of object {begin.object_id.hex()}: frames of {list(begin.frame_bytes)} bytes do not " \
                   f"add up to its {begin.total_bytes}"  # fmt: skip
        known = self._writing.get(begin.object_id)
        if known is not None:
            same = (known.begin.owner_id, known.begin.frame_bytes) == (begin.owner_id, begin.frame_bytes)
            if known.ended or not same:
                return f"object {begin.object_id.hex()} is being written already"
            known.begin, known.writer, known.written, known.progressed = begin, writer, 0, True
            self.heard += 1
            return None
        pieces, ends = piece_spans(begin)
        self._writing[begin.object_id] = Writing(begin, writer, pieces, ends)
        self.heard += 1
        return None

    def recover(self, begin: WriteBegin) -> None:
        """A write a previous server's peer began, found at start (its `.put` file): awaiting its writer (rule 6)."""
        if begin.object_id not in self._writing and sum(begin.frame_bytes) == begin.total_bytes:
            pieces, ends = piece_spans(begin)
            self._writing[begin.object_id] = Writing(begin, b"", pieces, ends)

    def under_way(self) -> int:
        """How many writes are under way (not ended)."""
        return sum(1 for writing in self._writing.values() if not writing.ended)

    def follow(self, object_id: bytes, peer: bytes, request_id: int, mapped: bool, in_parts: bool) -> list[Outgoing]:
        """A read of an object being written (rules 1 and 2): what to send it now."""
        writing = self._writing[object_id]
        if not in_parts or writing.total <= WIRE_PIECE_BYTES:
            writing.waiting.append(WaitingRead(peer, request_id, mapped, in_parts))
            return []
        begin = writing.begin
        header = StorageReply(
            request_id, StorageStatus.OK, "", ObjectSize(begin.total_bytes), frame_bytes=begin.frame_bytes,
            parts=len(writing.pieces),
        )  # fmt: skip
        writing.sent[(peer, request_id)] = 0
        return [(peer, header, None), *self._pieces_due(writing, stored=False)]

    def progress(self, object_id: bytes, writer: bytes, written: int, failed: str) -> list[Outgoing]:
        """The writer's report (rule 1, or 4 when it gave up): the pieces now due to the followers."""
        writing = self._writing[object_id]
        writing.progressed = True
        self.heard += 1
        if failed:
            return self.end(object_id, f"its writer gave up: {failed}")
        writing.written = max(writing.written, min(written, writing.total))
        return self._pieces_due(writing, stored=False)

    def stored(self, object_id: bytes) -> tuple[list[Outgoing], list[WaitingRead]]:
        """The object was adopted and is stored (rule 3): the pieces left for the followers (read from its segment
        file now), and the reads that waited, to answer as reads of a stored object. The write is forgotten."""
        writing = self._writing.pop(object_id)
        writing.written = writing.total
        self.heard += 1
        return self._pieces_due(writing, stored=True), writing.waiting

    def end(self, object_id: bytes, why: str) -> list[Outgoing]:
        """The write ended badly (rule 4): `notFound` to every reader; its adopt will be refused."""
        writing = self._writing[object_id]
        if writing.ended:
            return []
        writing.ended = why
        reason = f"object {ObjectID(object_id).hex()} was not stored: {why}"
        readers = [(peer, request_id) for peer, request_id in writing.sent]
        readers += [(read.peer, read.request_id) for read in writing.waiting]
        writing.sent.clear()
        writing.waiting.clear()
        return [(peer, StorageReply(request_id, StorageStatus.NOT_FOUND, reason), None) for peer, request_id in readers]

    def forget(self, object_id: bytes) -> None:
        """An ended write's adopt came (and was refused): nothing is left to remember."""
        self._writing.pop(object_id, None)

    def owned_by(self, owner_id: bytes) -> list[bytes]:
        """The objects being written for this owner."""
        return [
            oid for oid, writing in self._writing.items() if writing.begin.owner_id == owner_id and not writing.ended
        ]

    def sweep(self) -> list[Outgoing]:
        """Rule 4's stall: end the writes not heard of since the last sweep, forget those that ended before it."""
        outgoing: list[Outgoing] = []
        for object_id, writing in list(self._writing.items()):
            if writing.ended:
                del self._writing[object_id]  # its writer never came back for its adopt
            elif not writing.progressed:
                outgoing += self.end(object_id, "its writer stopped mid-write (no progress between two sweeps)")
            writing.progressed = False
        return outgoing

    def _pieces_due(self, writing: Writing, stored: bool) -> list[Outgoing]:
        """Each follower's pieces that are written and not sent yet; the last one only once the object is stored."""
        if stored:
            source = segment_name(writing.begin.object_id)
            due = len(writing.pieces)
        else:
            source = writing.begin.file_name
            due = sum(1 for end in writing.ends if end <= writing.written)
            due = min(due, len(writing.pieces) - 1)  # the last piece answers the read: only once stored
        outgoing: list[Outgoing] = []
        for (peer, request_id), sent in writing.sent.items():
            for index in range(sent, due):
                offset, length = writing.pieces[index]
                part = StorageReply(request_id, StorageStatus.OK)
                outgoing.append((peer, part, FilePiece(source, offset, length)))
            writing.sent[(peer, request_id)] = max(sent, due)
        return outgoing
