"""Spill files: one file per object in the spill directory, written so that a crash never leaves one that is served.

A file is `<stem>.<generation>.obj`, where the stem is the object id in hex (a hash of it for ids over 64 bytes)
and the generation is the store's number for that put. It is self-describing:

    header   b"SCALOBJ2", payload bytes (u64), id, owner and name lengths (u16 each), frame count (u32),
             then id, owner, name (UTF-8), then each frame's length (u64 each)
    payload  the object's bytes: its frames, in order
    trailer  CRC-32 of the header and the payload (u32), b"SCALEND1"

The frames are the object as it was put: a get returns them as they were received (docs/protocol.md, section 2.4),
and readers rely on it (a large `bytes` object is a marker frame, then its bytes). Files of the first format
(b"SCALOBJ1": no frame count nor lengths, a CRC of the payload only), which lost that, are still read: their
payload comes back in frames of CHUNK_BYTES, as the servers that wrote them served it.

A file is written under `<stem>.<generation>.tmp` and renamed once complete, so a server killed mid-write leaves a
`.tmp` file, which the next start discards. A file whose size, header or trailer is wrong (cut short by a machine
crash: files are not fsynced, so a crash of the machine, not of the server, can tear them) is discarded at start;
one whose header or payload does not match its CRC is discarded when it is read back. Either way with a log line,
and the object is then gone; it is never served. The directory is locked (`flock` on `.lock`) while a server uses
it.

Everything here is blocking I/O: the server calls it on its worker threads, or before it serves.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import mmap
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from scaler.protocol.storage_messages import CHUNK_BYTES

MAGIC = b"SCALOBJ2"
#: The first format: no frame lengths (the payload is read back in frames of CHUNK_BYTES).
MAGIC_V1 = b"SCALOBJ1"
END_MAGIC = b"SCALEND1"
_HEADER = struct.Struct("<8sQHHHI")  # magic, payload bytes, id / owner / name lengths, frame count
_HEADER_V1 = struct.Struct("<8sQHHH")  # magic, payload bytes, id / owner / name lengths
_FRAME_LENGTH = struct.Struct("<Q")
_TRAILER = struct.Struct("<I8s")  # crc32, end magic
LOCK_FILE = ".lock"
#: Objects from this size are read back as a memory map (no copy in the process); smaller ones are read into
#: bytes, so that many small objects do not each hold a mapping (a process may have about 65,000).
MAP_FROM_BYTES = 1024 * 1024
_WRITE_BYTES = 16 * 1024 * 1024  #: largest single write(), so a huge frame is written in steps
_FILE_NAME = re.compile(r"^(h?[0-9a-f]+)\.([0-9]+)\.(obj|tmp)$")


class SpillFileError(Exception):
    """A spill file is torn or corrupt; the text says how."""


class SpillDirectoryError(Exception):
    """The spill directory cannot be used (not creatable, or locked by another server)."""


@dataclass(frozen=True)
class FoundObject:
    object_id: bytes
    owner_id: bytes
    name: str
    total_bytes: int
    generation: int


@dataclass
class Scan:
    """What a spill directory held at start: its objects, and the files discarded (path, why)."""

    found: list[FoundObject] = dataclasses.field(default_factory=list)
    discarded: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def file_stem(object_id: bytes) -> str:
    return object_id.hex() if len(object_id) <= 64 else "h" + hashlib.sha256(object_id).hexdigest()


def object_path(directory: str, object_id: bytes, generation: int) -> str:
    return os.path.join(directory, f"{file_stem(object_id)}.{generation}.obj")


# ---------------------------------------------------------------- the directory


def lock_spill_directory(directory: str, what: str = "spill directory") -> int:
    """Create the directory (only its user may read it) and lock it; returns the lock's file descriptor, held
    for the life of the server. Raises SpillDirectoryError when another server holds it. (The segment directory is
    locked the same way; `what` names the directory in errors.)"""
    import fcntl  # here, not at the top: a client reads file names from this module where fcntl is absent (Windows)

    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        descriptor = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        raise SpillDirectoryError(f"{what} {directory}: {error.strerror}") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(descriptor)
        raise SpillDirectoryError(
            f"{what} {directory} is in use by another object storage server (pid {holder})"
        ) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


def scan_spill_directory(directory: str) -> Scan:
    """The objects of the spill directory, checked by size, header and trailer; unfinished, torn and
    superseded files are removed and listed in `discarded`. Other files are left alone."""
    scan = Scan()
    newest: dict[bytes, tuple[FoundObject, str]] = {}
    for entry in sorted(os.scandir(directory), key=lambda entry: entry.name):
        match = _FILE_NAME.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        if match.group(3) == "tmp":
            _discard(scan, entry.path, "an unfinished write (the server stopped while writing it)")
            continue
        try:
            found = _read_description(entry.path, int(match.group(2)))
        except (SpillFileError, OSError) as error:
            _discard(scan, entry.path, str(error))
            continue
        if file_stem(found.object_id) != match.group(1):
            _discard(scan, entry.path, "its name does not match the object id inside")
            continue
        previous = newest.get(found.object_id)
        if previous is not None:
            older, newer = sorted([previous, (found, entry.path)], key=lambda pair: pair[0].generation)
            _discard(scan, older[1], "superseded by a newer file of the same object")
            found, path = newer
        else:
            path = entry.path
        newest[found.object_id] = (found, path)
    scan.found = [found for found, _ in newest.values()]
    return scan


def _discard(scan: Scan, path: str, why: str) -> None:
    scan.discarded.append((path, why))
    remove_file(path)


@dataclass(frozen=True)
class _Head:
    """What a spill file's header says: its object, its payload's size and frames, and where the payload starts."""

    object_id: bytes
    owner_id: bytes
    name: str
    total_bytes: int
    frame_lengths: tuple[int, ...] | None  #: None in a file of the first format (frames not recorded)
    payload_start: int
    checked: bytes  #: the header bytes its CRC covers besides the payload (none in the first format)


def _read_head(read_at: Callable[[int, int], bytes | memoryview], size: int) -> _Head:
    """The head of a file of `size` bytes, read through `read_at(offset, length)`; raises SpillFileError when
    the file is not a spill file or its size is not the one its header announces (torn)."""
    magic = read_at(0, len(MAGIC))
    layout = _HEADER if magic == MAGIC else _HEADER_V1
    if len(magic) == len(MAGIC) and magic not in (MAGIC, MAGIC_V1):
        raise SpillFileError("not a spill file (wrong magic number)")
    fixed = read_at(0, layout.size)
    if len(fixed) < layout.size:
        raise SpillFileError(f"torn: {size} bytes, shorter than a header")
    _, total, id_length, owner_length, name_length, *count = layout.unpack(fixed)
    frame_count = count[0] if count else 0
    described_length = id_length + owner_length + name_length + _FRAME_LENGTH.size * frame_count
    payload_start = layout.size + described_length
    expected = payload_start + total + _TRAILER.size
    if size != expected:
        raise SpillFileError(f"torn: {size} bytes where its header announces {expected}")
    described = read_at(layout.size, described_length)
    if len(described) < described_length:
        raise SpillFileError(f"torn: {size} bytes where its header announces {expected}")
    table = described[id_length + owner_length + name_length :]
    frame_lengths = tuple(length for (length,) in _FRAME_LENGTH.iter_unpack(table)) if count else None
    if frame_lengths is not None and sum(frame_lengths) != total:
        raise SpillFileError(f"corrupt: its frames add up to {sum(frame_lengths)} bytes, its header says {total}")
    try:
        name = bytes(described[id_length + owner_length : id_length + owner_length + name_length]).decode()
    except UnicodeDecodeError:
        raise SpillFileError("corrupt: its name is not UTF-8") from None
    return _Head(
        bytes(described[:id_length]),
        bytes(described[id_length : id_length + owner_length]),
        name,
        total,
        frame_lengths,
        payload_start,
        bytes(fixed) + bytes(described) if count else b"",
    )


def _read_description(path: str, generation: int) -> FoundObject:
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        head = _read_head(lambda offset, length: os.pread(file.fileno(), length, offset), size)
        _, end = _TRAILER.unpack(os.pread(file.fileno(), _TRAILER.size, size - _TRAILER.size))
        if end != END_MAGIC:
            raise SpillFileError("torn: its trailer is missing")
    return FoundObject(head.object_id, head.owner_id, head.name, head.total_bytes, generation)


# ---------------------------------------------------------------- one object


def write_object_file(
    directory: str, object_id: bytes, generation: int, owner_id: bytes, name: str, buffers: Sequence[memoryview]
) -> None:
    """Write the object's spill file, its frames (`buffers`) and their lengths: under a temporary name, renamed
    when complete. Raises OSError (a full disk, say); nothing is left behind then."""
    final = object_path(directory, object_id, generation)
    temporary = final[: -len(".obj")] + ".tmp"
    encoded_name = name.encode()
    views = [_byte_view(buffer) for buffer in buffers]
    lengths = [len(view) for view in views]
    header = _HEADER.pack(MAGIC, sum(lengths), len(object_id), len(owner_id), len(encoded_name), len(views))
    head = header + object_id + owner_id + encoded_name + b"".join(_FRAME_LENGTH.pack(n) for n in lengths)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            crc = _write_all(descriptor, [memoryview(head)], 0)
            crc = _write_all(descriptor, views, crc)
            _write_all(descriptor, [memoryview(_TRAILER.pack(crc, END_MAGIC))], 0)
        finally:
            os.close(descriptor)
        os.replace(temporary, final)
    except BaseException:
        remove_file(temporary)
        raise


def _byte_view(buffer: memoryview) -> memoryview:
    return buffer.cast("B") if buffer.format != "B" or buffer.ndim != 1 else buffer


def _write_all(descriptor: int, views: Iterable[memoryview], crc: int) -> int:
    """Write every byte of the byte views, in order; returns `crc` carried on over them (CRC-32)."""
    for view in views:
        for offset in range(0, len(view), _WRITE_BYTES):
            piece = view[offset : offset + _WRITE_BYTES]
            crc = zlib.crc32(piece, crc)
            while len(piece):
                written = os.write(descriptor, piece)
                if written == 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                piece = piece[written:]
    return crc


def read_object_file(directory: str, object_id: bytes, generation: int, total_bytes: int) -> list[memoryview]:
    """The object's payload from its spill file, as the frames it was put in (views of a memory map from
    MAP_FROM_BYTES on; of CHUNK_BYTES for a file of the first format). Raises SpillFileError when the file is torn
    or corrupt, OSError when it cannot be read."""
    path = object_path(directory, object_id, generation)
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        if size < _HEADER_V1.size + _TRAILER.size + total_bytes:
            raise SpillFileError(f"torn: {size} bytes for an object of {total_bytes}")
        if total_bytes >= MAP_FROM_BYTES:
            content: memoryview = memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
        else:
            content = memoryview(file.read())
    try:
        head = _read_head(lambda offset, length: content[offset : offset + length], size)
    except SpillFileError as error:
        raise SpillFileError(f"corrupt: its header does not describe this object ({error})") from None
    if head.object_id != object_id or head.total_bytes != total_bytes:
        raise SpillFileError("corrupt: its header does not describe this object")
    start, end = head.payload_start, head.payload_start + total_bytes
    payload = content[start:end]
    crc, end_magic = _TRAILER.unpack(content[end:])
    if end_magic != END_MAGIC or zlib.crc32(payload, zlib.crc32(head.checked)) != crc:
        raise SpillFileError("corrupt: its content does not match its checksum")
    if head.frame_lengths is None:
        return [payload[offset : offset + CHUNK_BYTES] for offset in range(0, total_bytes, CHUNK_BYTES)]
    frames = []
    for length in head.frame_lengths:
        frames.append(payload[:length])
        payload = payload[length:]
    return frames


def remove_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_object_file(directory: str, object_id: bytes, generation: int) -> None:
    remove_file(object_path(directory, object_id, generation))
