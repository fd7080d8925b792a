"""Segment files: the objects the storage holds in memory, one file each in its segment directory (shared memory).

A segment file is `<stem>.obj` (the stem is the spill files' one: the object id in hex, a hash of it for ids over 64
bytes), so a reader on the server's host finds an object by its id alone. It is self-describing, and laid out so that
a reader maps it and builds values on its frames without a copy:

    header   b"SCALSEG1", payload bytes (u64), id, owner and name lengths (u16 each), frame count (u32),
             then id, owner, name (UTF-8), then each frame's offset from the file's start and length (u64 each)
    frames   each from an offset that is a multiple of ALIGN (64: a cache line, and what numpy wants of an array),
             the bytes between them zeros (the holes of a sparse file: they take no memory)

No checksum: a segment file is never torn. It is written whole under another name (`<stem>.<token>.tmp` by the
server, `<anything>.put` by a peer on the host) and renamed into place, and a segment directory does not outlive its
machine's boot (a directory left from an earlier boot is emptied when a server adopts it: a fallback directory on a
disk may hold files a crash of the machine tore).

The frames are the object as it was put, as with spill files: a get gives the frames of the put. Everything here is
blocking I/O (the server calls it on its event loop for renames and removals, on a thread for writes), and the readers
(object_storage/local_segments.py) call `map_segment` and `write_segment` too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import mmap
import os
import stat
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scaler.object_storage.spill_files import file_stem

MAGIC = b"SCALSEG1"
#: Every frame starts at a multiple of this offset in its file.
ALIGN = 64
_HEADER = struct.Struct("<8sQHHHI")  # magic, payload bytes, id / owner / name lengths, frame count
_FRAME = struct.Struct("<QQ")  # offset, length
MAX_NAME_BYTES = 0xFFFF  #: the longest name the header holds (an unsigned short)
_WRITE_BYTES = 16 * 1024 * 1024  #: largest single write(), so a huge frame is written in steps
_HEAD_GUESS = 4096  #: bytes read at once for a file's header (more when its frame table is longer)
SEGMENT_SUFFIX = ".obj"
TEMPORARY_SUFFIX = ".tmp"
#: A file a peer on the host wrote for the server to adopt (`Adopt.file_name`).
PUT_SUFFIX = ".put"


class SegmentFileError(Exception):
    """A segment file is not one, or not the one expected; the text says how."""


@dataclass(frozen=True)
class SegmentHead:
    """What a segment file's header says."""

    object_id: bytes
    owner_id: bytes
    name: str
    total_bytes: int
    frames: tuple[tuple[int, int], ...]  #: (offset, length) of each frame, in order
    file_bytes: int  #: the size the file must have


@dataclass(frozen=True)
class FoundSegment:
    object_id: bytes
    owner_id: bytes
    name: str
    total_bytes: int


@dataclass(frozen=True)
class FoundPut:
    """A file a peer wrote for adoption (`.put`), found at start: a write its writer may come back to."""

    file_name: str
    head: SegmentHead


@dataclass
class SegmentScan:
    """What a segment directory held when a server adopted it, the files written for adoption whose header is whole
    (`puts`), and the files discarded (path, why)."""

    found: list[FoundSegment] = dataclasses.field(default_factory=list)
    discarded: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    puts: list[FoundPut] = dataclasses.field(default_factory=list)


def segment_name(object_id: bytes) -> str:
    return file_stem(object_id) + SEGMENT_SUFFIX


def segment_path(directory: str, object_id: bytes) -> str:
    return os.path.join(directory, segment_name(object_id))


def temporary_name(object_id: bytes, token: int) -> str:
    return f"{file_stem(object_id)}.{token}{TEMPORARY_SUFFIX}"


def _aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


def layout(object_id: bytes, owner_id: bytes, name: str, lengths: Sequence[int]) -> tuple[bytes, SegmentHead]:
    """The header bytes of a segment file holding frames of these lengths, and what it says. A name longer than the
    header can say (MAX_NAME_BYTES, UTF-8) is cut there: it only describes the object."""
    encoded_name = name.encode()
    if len(encoded_name) > MAX_NAME_BYTES:
        name = encoded_name[:MAX_NAME_BYTES].decode(errors="ignore")
        encoded_name = name.encode()
    described = len(object_id) + len(owner_id) + len(encoded_name)
    offset = _aligned(_HEADER.size + described + _FRAME.size * len(lengths))
    frames = []
    for length in lengths:
        frames.append((offset, length))
        offset = _aligned(offset + length)
    file_bytes = frames[-1][0] + frames[-1][1] if frames else _HEADER.size + described
    fixed = _HEADER.pack(MAGIC, sum(lengths), len(object_id), len(owner_id), len(encoded_name), len(lengths))
    table = b"".join(_FRAME.pack(start, length) for start, length in frames)
    head = SegmentHead(bytes(object_id), bytes(owner_id), name, sum(lengths), tuple(frames), file_bytes)
    return fixed + bytes(object_id) + bytes(owner_id) + encoded_name + table, head


def _byte_view(buffer: Any) -> memoryview:
    view = memoryview(buffer)
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def write_segment(
    path: str, object_id: bytes, owner_id: bytes, name: str, buffers: Sequence[Any], mode: int = 0o600
) -> SegmentHead:
    """Write a complete segment file at `path` (a temporary name: the caller renames it into place) holding the
    frames `buffers`. Raises OSError (ENOSPC: the directory is full); nothing is left behind then."""
    views = [_byte_view(buffer) for buffer in buffers]
    head_bytes, head = layout(object_id, owner_id, name, [view.nbytes for view in views])
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            if head.file_bytes <= _WRITE_BYTES:  # one write: the header, each frame and the zeros that align the next
                _write_whole(descriptor, head_bytes, views, head)
            else:
                os.ftruncate(descriptor, head.file_bytes)  # the gaps stay holes; a full tmpfs refuses the writes below
                _write_at(descriptor, memoryview(head_bytes), 0)
                for view, (offset, _) in zip(views, head.frames, strict=True):
                    _write_at(descriptor, view, offset)
        finally:
            os.close(descriptor)
    except BaseException:
        remove_file(path)
        raise
    return head


class SegmentWriter:
    """A segment file written in steps, so that a reader may follow it (followed_writes.py): `open` writes its header
    and sets its size (the payload's pages stay holes), `write_next` writes the next bytes of the frames, in order.
    Raises OSError (ENOSPC); `discard` removes the file."""

    def __init__(self, path: str, object_id: bytes, owner_id: bytes, name: str, buffers: Sequence[Any]) -> None:
        self.path = path
        self._views = [_byte_view(buffer) for buffer in buffers]
        head_bytes, self.head = layout(object_id, owner_id, name, [view.nbytes for view in self._views])
        self._descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(self._descriptor, self.head.file_bytes)
            _write_at(self._descriptor, memoryview(head_bytes), 0)
        except BaseException:
            self.discard()
            raise
        self._frame = 0  #: the frame being written
        self._done = 0  #: its bytes written
        self.written = 0  #: payload bytes written

    def write_next(self, limit: int) -> int:
        """Write up to `limit` more payload bytes; returns the payload bytes written in all (the total once done)."""
        while limit > 0 and self._frame < len(self._views):
            view = self._views[self._frame]
            step = min(limit, view.nbytes - self._done)
            _write_at(
                self._descriptor, view[self._done : self._done + step], self.head.frames[self._frame][0] + self._done
            )
            self._done += step
            self.written += step
            limit -= step
            if self._done == view.nbytes:
                self._frame, self._done = self._frame + 1, 0
        return self.written

    def close(self) -> None:
        if self._descriptor >= 0:
            os.close(self._descriptor)
            self._descriptor = -1

    def discard(self) -> None:
        self.close()
        remove_file(self.path)


_ZEROS = bytes(ALIGN)


def _write_whole(descriptor: int, head_bytes: bytes, views: list[memoryview], head: SegmentHead) -> None:
    """A file of at most _WRITE_BYTES in one pwritev (a write cut short, as by a full tmpfs, goes on piece by piece):
    each system call of a client's put is a chance for its other threads to take the interpreter's lock."""
    pieces: list[Any] = [head_bytes]
    at = len(head_bytes)
    for view, (offset, length) in zip(views, head.frames, strict=True):
        if offset > at:
            pieces.append(_ZEROS[: offset - at])
        pieces.append(view)
        at = offset + length
    written = os.pwritev(descriptor, pieces, 0)
    if written == at:
        return
    start = 0
    for piece in pieces:
        length = memoryview(piece).nbytes
        if start + length > written:
            skipped = max(0, written - start)
            _write_at(descriptor, memoryview(piece)[skipped:], start + skipped)
        start += length


def _write_at(descriptor: int, view: memoryview, offset: int) -> None:
    for start in range(0, len(view), _WRITE_BYTES):
        piece = view[start : start + _WRITE_BYTES]
        at = offset + start
        while len(piece):
            written = os.pwrite(descriptor, piece, at)
            if written == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            piece, at = piece[written:], at + written


def read_head(content: Any, size: int) -> SegmentHead:
    """The header of a segment file of `size` bytes whose bytes `content` holds (a map, bytes); raises
    SegmentFileError when it is not a segment file or its size is not the one its header announces."""
    view = memoryview(content)
    if size < _HEADER.size or bytes(view[: len(MAGIC)]) != MAGIC:
        raise SegmentFileError("not a segment file (wrong magic number or too short)")
    _, total, id_length, owner_length, name_length, count = _HEADER.unpack(view[: _HEADER.size])
    start = _HEADER.size
    table_start = start + id_length + owner_length + name_length
    if table_start + _FRAME.size * count > size:
        raise SegmentFileError(f"torn: {size} bytes, shorter than its header")
    described = view[start:table_start]
    frames = tuple(_FRAME.iter_unpack(view[table_start : table_start + _FRAME.size * count]))
    file_bytes = frames[-1][0] + frames[-1][1] if frames else table_start
    if file_bytes != size:
        raise SegmentFileError(f"torn: {size} bytes where its header announces {file_bytes}")
    if sum(length for _, length in frames) != total or any(offset % ALIGN for offset, _ in frames):
        raise SegmentFileError("corrupt: its frame table does not match its header")
    try:
        name = bytes(described[id_length + owner_length :]).decode()
    except UnicodeDecodeError:
        raise SegmentFileError("corrupt: its name is not UTF-8") from None
    return SegmentHead(
        bytes(described[:id_length]), bytes(described[id_length : id_length + owner_length]), name, total, frames,
        file_bytes,
    )  # fmt: skip


def read_head_of_file(path: str) -> SegmentHead:
    """The header of the segment file at `path`, read without mapping it. Raises SegmentFileError (also for anything
    but a regular file), OSError (a symbolic link: ELOOP)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO put there does not block it
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise SegmentFileError("not a regular file")
        size = status.st_size
        fixed = os.pread(descriptor, _HEAD_GUESS, 0)  # the whole header at once, unless it describes many frames
        if len(fixed) < _HEADER.size or fixed[: len(MAGIC)] != MAGIC:
            raise SegmentFileError("not a segment file (wrong magic number or too short)")
        _, _, id_length, owner_length, name_length, count = _HEADER.unpack(fixed[: _HEADER.size])
        length = _HEADER.size + id_length + owner_length + name_length + _FRAME.size * count
        return read_head(fixed if length <= len(fixed) else os.pread(descriptor, length, 0), size)
    finally:
        os.close(descriptor)


@dataclass
class MappedSegment:
    """A segment file mapped into this process: its frames are views of the map (read-only unless the map is a
    private, copy-on-write one). The map lives as long as any view of it (a value built on a frame holds one)."""

    head: SegmentHead
    frames: list[memoryview]
    writable: bool


def map_segment(path: str, copy_on_write: bool = False, object_id: bytes | None = None) -> MappedSegment:
    """Map the segment file at `path`: read-only (shared with every process that maps it), or private and writable
    (`copy_on_write`: a page written is copied first, so nobody else sees the write). Raises FileNotFoundError when
    there is no such file, SegmentFileError when it is not a segment file (of `object_id`, when given)."""
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            raise SegmentFileError("not a segment file (empty)")
        access = mmap.ACCESS_COPY if copy_on_write else mmap.ACCESS_READ
        mapping = mmap.mmap(file.fileno(), 0, access=access)
    head = read_head(mapping, size)
    if object_id is not None and head.object_id != bytes(object_id):
        raise SegmentFileError(f"corrupt: {path} holds object {head.object_id.hex()}")
    whole = memoryview(mapping)
    return MappedSegment(head, [whole[offset : offset + length] for offset, length in head.frames], copy_on_write)


def scan_segment_directory(directory: str) -> SegmentScan:
    """The objects of a segment directory that a server adopts at start, checked by their header and size;
    temporary files (writes a stopped server left) are removed. Files peers wrote for adoption (`.put`) are left for
    their adopt request (or their writer writing them again), and listed when their header is whole; other files are
    left alone."""
    scan = SegmentScan()
    for entry in sorted(os.scandir(directory), key=lambda entry: entry.name):
        if not entry.is_file(follow_symlinks=False):
            continue
        if entry.name.endswith(TEMPORARY_SUFFIX):
            scan.discarded.append((entry.path, "an unfinished write (the server stopped while writing it)"))
            remove_file(entry.path)
            continue
        if entry.name.endswith(PUT_SUFFIX):  # left for its adopt, or its writer writing it again
            with contextlib.suppress(SegmentFileError, OSError):
                scan.puts.append(FoundPut(entry.name, read_head_of_file(entry.path)))
            continue
        if not entry.name.endswith(SEGMENT_SUFFIX):
            continue
        try:
            head = read_head_of_file(entry.path)
            if segment_name(head.object_id) != entry.name:
                raise SegmentFileError("its name does not match the object id inside")
        except (SegmentFileError, OSError) as error:
            scan.discarded.append((entry.path, str(error)))
            remove_file(entry.path)
            continue
        scan.found.append(FoundSegment(head.object_id, head.owner_id, head.name, head.total_bytes))
    return scan


def remove_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
