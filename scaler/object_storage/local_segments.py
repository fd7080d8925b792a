"""The object storage's segment directory as a process of its host sees it: objects mapped, and written for adoption.

A storage connection learns from its hello's reply where the server keeps objects in memory (`SegmentDirectory`);
when this process sees that very directory (segment_sight.sees: same boot, device and inode, same user), it is on
the server's host, and objects move through the directory instead of the socket:

- reading: an object held as a segment file is mapped (segment_files.map_segment): read-only and shared with every
  process of the host that maps it, or private and writable (copy on write) when asked. A value built on the map
  (pickle protocol 5 buffers: numpy arrays, pandas blocks) uses the map's memory: N processes reading one object
  cost one copy of it on the host. A processor maps an object by its name without asking the server first (a file
  named after an object is that object, and a deleted object's file is gone once its delete was answered); so does a
  client for its own objects (the file's header names their owner), and it asks `getMapped` for any other (the
  server checks that it may read it) and for an object without a file (on disk only: the server reads it back).
- writing: an object from SEGMENT_FROM_BYTES on is written whole into a file of its own (`<id>.<pid>-<n>.put`), whose
  adoption the connection then asks for: no byte crosses the socket.

Everything here is blocking file I/O, for the blocking shells (connection.py, put_pipeline.py).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from typing import Any

from scaler.object_storage.segment_files import (
    PUT_SUFFIX,
    SegmentFileError,
    SegmentWriter,
    map_segment,
    remove_file,
    segment_path,
    write_segment,
)
from scaler.object_storage.segment_sight import sees
from scaler.object_storage.spill_files import file_stem
from scaler.object_storage.store import SEGMENT_FROM_BYTES
from scaler.protocol.storage_messages import SegmentDirectory

_names = itertools.count(1)
_names_lock = threading.Lock()
_seen: dict[SegmentDirectory, bool] = {}


def local_segments(described: Any) -> LocalSegments | None:
    """The server's segment directory when this process sees it (None: another host, container or user, or a server
    without one). `described` is a hello's reply value."""
    if not isinstance(described, SegmentDirectory) or not described.path:
        return None
    seen = _seen.get(described)
    if seen is None:
        seen = _seen[described] = sees(described)
    return LocalSegments(described.path) if seen else None


class LocalSegments:
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def read(
        self, object_id: bytes, copy_on_write: bool = False, owner_id: bytes | None = None
    ) -> list[memoryview] | None:
        """The object's frames, mapped from its segment file (read-only and shared, or private and writable with
        `copy_on_write`); None when there is none (the object is small, on disk only, being written, or not stored),
        or, with `owner_id`, when the file says another owner put it (a client reads only its own by name)."""
        try:
            mapped = map_segment(segment_path(self.directory, object_id), copy_on_write, object_id)
            if owner_id is not None and mapped.head.owner_id != bytes(owner_id):
                return None
            return mapped.frames
        except FileNotFoundError:
            return None
        except (SegmentFileError, OSError):
            return None  # not readable here after all: the socket gives it

    def write(self, object_id: bytes, owner_id: bytes, name: str, buffers: Sequence[Any]) -> str | None:
        """Write the object into a file for adoption; returns its name, or None when it is too small to be worth a
        file or cannot be written here (the directory is full: the socket takes it)."""
        if sum(memoryview(buffer).nbytes for buffer in buffers) < SEGMENT_FROM_BYTES:
            return None
        file_name = self._put_name(object_id)
        try:
            write_segment(os.path.join(self.directory, file_name), object_id, owner_id, name, buffers)
        except OSError:
            return None
        return file_name

    def begin(self, object_id: bytes, owner_id: bytes, name: str, buffers: Sequence[Any]) -> SegmentWriter | None:
        """A file for adoption whose header is written and its payload not yet (`SegmentWriter`), for a write readers
        follow; None when it cannot be made here."""
        try:
            return SegmentWriter(os.path.join(self.directory, self._put_name(object_id)), object_id, owner_id, name,
                                 buffers)  # fmt: skip
        except OSError:
            return None

    def _put_name(self, object_id: bytes) -> str:
        with _names_lock:
            number = next(_names)
        return f"{file_stem(object_id)}.{os.getpid()}-{number}{PUT_SUFFIX}"

    def discard(self, file_name: str) -> None:
        """Remove a file written for an adoption that was refused (an adopted one was renamed already)."""
        remove_file(os.path.join(self.directory, file_name))
