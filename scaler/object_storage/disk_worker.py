"""Carries out the object store's disk work on threads, and reports each result back on the event loop.

Writes and removals run in order on one thread: a removal the store decided after a write (the object was
deleted, or replaced) never overtakes it, and one thread is as fast as the disk anyway. Reads run on two other
threads, so that a get of a spilled object does not wait behind a queue of large writes. The threads release the
GIL while they write, read and checksum, so the event loop goes on serving meanwhile.

At close, the write under way finishes and the writes still queued are dropped (their puts were not answered), but
the removals still queued are carried out: an object whose delete was answered must not be found again by the next
server in the directory. (A server killed with SIGKILL cannot do this; its successor may find objects deleted in
its last moments.)
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scaler.object_storage.spill_files import (
    SpillFileError,
    object_path,
    read_object_file,
    remove_object_file,
    write_object_file,
)
from scaler.object_storage.store import DiskWork, PayloadBuffer, ReadFile, RemoveFile, WriteFile

logger = logging.getLogger(__name__)

#: (object id, generation, error or None) of a finished write
WriteDone = Callable[[bytes, int, "str | None"], None]
#: (object id, generation, frames or None, problem) of a finished read
ReadDone = Callable[[bytes, int, "Sequence[PayloadBuffer] | None", str], None]


def _buffer(frame: Any) -> memoryview:
    """A payload frame as a byte view: a zmq.Frame through its `buffer`, bytes and views as they are."""
    buffer = getattr(frame, "buffer", frame)
    return memoryview(buffer)


class DiskWorker:
    def __init__(self, directory: str, written: WriteDone, read: ReadDone) -> None:
        self.directory = directory
        self._written = written
        self._read = read
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="storage-spill-write")
        self._reads = ThreadPoolExecutor(2, thread_name_prefix="storage-spill-read")
        self._closing = False  #: set by close: queued writes are skipped, and nothing is reported any more

    def run(self, work: Sequence[DiskWork]) -> None:
        loop = asyncio.get_running_loop()
        for item in work:
            if isinstance(item, WriteFile):
                buffers = [_buffer(frame) for frame in item.frames]
                written = loop.run_in_executor(self._writes, self._write, item, buffers)
                written.add_done_callback(functools.partial(self._write_done, item))
            elif isinstance(item, ReadFile):
                read = loop.run_in_executor(
                    self._reads, read_object_file, self.directory, item.object_id, item.generation, item.total_bytes
                )
                read.add_done_callback(functools.partial(self._read_done, item))
            elif isinstance(item, RemoveFile):
                removed = loop.run_in_executor(
                    self._writes, remove_object_file, self.directory, item.object_id, item.generation
                )
                removed.add_done_callback(functools.partial(self._remove_done, item))

    def close(self) -> None:
        """Finish the write under way and the removals queued, skip the writes queued (a put not yet answered may
        be lost, as in a crash; never torn), and stop."""
        self._closing = True
        self._writes.shutdown(wait=True)
        self._reads.shutdown(wait=True, cancel_futures=True)

    def _write(self, item: WriteFile, buffers: list[memoryview]) -> None:
        if not self._closing:
            write_object_file(self.directory, item.object_id, item.generation, item.owner_id, item.name, buffers)

    def _write_done(self, item: WriteFile, done: asyncio.Future[None]) -> None:
        if done.cancelled() or self._closing:
            return
        error = done.exception()
        if error is not None and not isinstance(error, OSError):
            logger.error("writing spill file %s failed: %r", self._path(item), error)
        reason = None if error is None else (getattr(error, "strerror", None) or str(error))
        self._written(item.object_id, item.generation, reason)

    def _read_done(self, item: ReadFile, done: asyncio.Future[list[memoryview]]) -> None:
        if done.cancelled() or self._closing:
            return
        error = done.exception()
        if error is None:
            self._read(item.object_id, item.generation, done.result(), "")
            return
        problem = str(error) if isinstance(error, SpillFileError) else f"could not be read: {error}"
        logger.warning(
            "discarding spill file %s: %s (object %s is lost)", self._path(item), problem, item.object_id.hex()
        )
        self._read(item.object_id, item.generation, None, problem)

    def _remove_done(self, item: RemoveFile, done: asyncio.Future[None]) -> None:
        if not done.cancelled() and done.exception() is not None:
            logger.warning("could not remove spill file %s: %s", self._path(item), done.exception())

    def _path(self, item: DiskWork) -> str:
        return object_path(self.directory, item.object_id, item.generation)
