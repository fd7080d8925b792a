"""Carries out the object store's file work: on threads, reporting each result back on the event loop, or at once.

Spill writes and removals run in order on one thread: a removal the store decided after a write (the object was
deleted, or replaced) never overtakes it, and one thread is as fast as the disk anyway. Reads run on two other
threads, so that a get of a spilled object does not wait behind a queue of large writes; a read of an object held as
a segment file writes its temporary segment file there too. Writes of temporary segment files run on a thread of
their own (memory speed: they must not wait behind the disk). The threads release the GIL while they write, read and
checksum, so the event loop goes on serving meanwhile.

What touches the segment files that readers find by name (placing a written file, adopting a peer's file, removing
one) is done at once on the event loop, in the order the store decided it (`carry_out_at_once`): cheap calls (a
rename, an unlink), and doing them in order is what keeps a segment file's name naming the current object.

At close, the write under way finishes and the writes of puts still queued are dropped (their puts were not answered:
their clients send them again, frames and all), but the removals still queued are carried out: an object whose delete
was answered must not be found again by the next server in the directory. (A server killed with SIGKILL cannot do
this; its successor may find objects deleted in its last moments.) The queued writes of objects held as segment files
(an adopt's file, or one taken at start) are carried out too, for the objects the store still holds: their bytes are
in the server's segment directory only, which a server that stops removes, so an adopter that sends its adopt again
would have nothing to send.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scaler.object_storage import segment_files
from scaler.object_storage.segment_files import SegmentFileError, map_segment, segment_path
from scaler.object_storage.spill_files import (
    SpillFileError,
    object_path,
    read_object_file,
    remove_object_file,
    write_object_file,
)
from scaler.object_storage.store import (
    ADOPTED_BEFORE,
    AdoptResult,
    AdoptSegment,
    DiscardPutFile,
    DiscardSegment,
    DiskWork,
    PayloadBuffer,
    PlaceSegment,
    ReadFile,
    RemoveFile,
    RemoveSegment,
    WriteFile,
    WriteSegment,
)

logger = logging.getLogger(__name__)

#: (object id, generation, error or None) of a finished write (of a spill file, or of a segment file)
WriteDone = Callable[[bytes, int, "str | None"], None]
#: (object id, generation, frames or None, problem, whether the frames are a segment file's) of a finished read
ReadDone = Callable[[bytes, int, "Sequence[PayloadBuffer] | None", str, bool], None]


def _buffer(frame: Any) -> memoryview:
    """A payload frame as a byte view: a zmq.Frame through its `buffer`, bytes and views as they are."""
    buffer = getattr(frame, "buffer", frame)
    return memoryview(buffer)


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error)


class DiskWorker:
    def __init__(
        self,
        directory: str | None,
        written: WriteDone,
        read: ReadDone,
        segment_directory: str | None = None,
        segment_written: WriteDone | None = None,
    ) -> None:
        """`directory`: the spill directory (None: none); `segment_directory`: the segment directory (None: none)."""
        self.directory = directory
        self.segment_directory = segment_directory
        self._written = written
        self._read = read
        self._segment_written = segment_written
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="storage-spill-write")
        self._reads = ThreadPoolExecutor(2, thread_name_prefix="storage-spill-read")
        self._segment_writes = ThreadPoolExecutor(1, thread_name_prefix="storage-segment-write")
        self._closing = False  #: set by close: queued writes are skipped, and nothing is reported any more
        #: set by close: the (object id, generation) of the queued spill writes from segment files still carried out
        self._kept: frozenset[tuple[bytes, int]] = frozenset()

    def run(self, work: Sequence[DiskWork]) -> None:
        """Hand the work that runs on threads to them (`carry_out_at_once` does the rest)."""
        loop = asyncio.get_running_loop()
        for item in work:
            if isinstance(item, WriteFile):
                buffers = self._spill_source(item)
                if buffers is None:
                    self._written(item.object_id, item.generation, "its segment file is gone")
                    continue
                written = loop.run_in_executor(self._writes, self._write, item, buffers)
                written.add_done_callback(functools.partial(self._write_done, item))
            elif isinstance(item, ReadFile):
                read = loop.run_in_executor(self._reads, self._read_file, item)
                read.add_done_callback(functools.partial(self._read_done, item))
            elif isinstance(item, RemoveFile):
                assert self.directory is not None
                removed = loop.run_in_executor(
                    self._writes, remove_object_file, self.directory, item.object_id, item.generation
                )
                removed.add_done_callback(functools.partial(self._remove_done, item))
            elif isinstance(item, WriteSegment):
                segment_written = loop.run_in_executor(self._segment_writes, self._write_segment, item)
                segment_written.add_done_callback(functools.partial(self._segment_write_done, item))
            else:
                raise AssertionError(f"{item!r} is carried out at once, not on a thread")

    def carry_out_at_once(
        self, item: PlaceSegment | AdoptSegment | RemoveSegment | DiscardSegment | DiscardPutFile
    ) -> str | AdoptResult | None:
        """Rename or remove a segment file now. Returns why an adopt's file was refused (None: done; ADOPTED_BEFORE:
        a held object's adopt whose file is gone, see `AdoptSegment.held`)."""
        assert self.segment_directory is not None
        directory = self.segment_directory
        if isinstance(item, PlaceSegment):
            temporary = os.path.join(directory, segment_files.temporary_name(item.object_id, item.token))
            os.replace(temporary, segment_path(directory, item.object_id))
        elif isinstance(item, RemoveSegment):
            segment_files.remove_file(segment_path(directory, item.object_id))
        elif isinstance(item, DiscardSegment):
            segment_files.remove_file(os.path.join(directory, segment_files.temporary_name(item.object_id, item.token)))
        elif isinstance(item, DiscardPutFile):
            segment_files.remove_file(os.path.join(directory, item.file_name))
        else:
            return self._adopt(item)
        return None

    def _adopt(self, item: AdoptSegment) -> str | AdoptResult | None:
        assert self.segment_directory is not None
        path = os.path.join(self.segment_directory, item.file_name)
        final = segment_path(self.segment_directory, item.object_id)
        try:
            try:
                _check_head(path, item)  # a regular file (not a link, not a FIFO) holding this object
            except FileNotFoundError:
                if item.held:  # sent again after its file was adopted: the object may have left its segment since
                    return ADOPTED_BEFORE
                _check_head(final, item)  # a request sent again to a server that adopted it already
                return None
            os.replace(path, final)
        except (SegmentFileError, OSError) as error:
            segment_files.remove_file(path)
            where = f"{item.file_name} in the segment directory"
            return f"adopt of object {item.object_id.hex()}: {where}: {_reason(error)}"
        return None

    def close(self, still_stored: Collection[tuple[bytes, int]] = ()) -> None:
        """Finish the write under way and the removals queued, skip the writes of puts queued (a put not yet answered
        may be lost, as in a crash; never torn), carry out the writes queued from segment files of the objects
        `still_stored` ((object id, generation): their bytes are nowhere else), and stop."""
        self._kept = frozenset(still_stored)  # before closing: the write thread reads it once it sees the flag
        self._closing = True
        self._writes.shutdown(wait=True)
        self._reads.shutdown(wait=True, cancel_futures=True)
        self._segment_writes.shutdown(wait=True, cancel_futures=True)

    def _spill_source(self, item: WriteFile) -> list[memoryview] | None:
        """The frames a spill file is written from: the put's, or its segment file's (mapped now: later renames and
        removals do not change what a map shows)."""
        if item.frames is not None:
            return [_buffer(frame) for frame in item.frames]
        assert self.segment_directory is not None
        try:
            return map_segment(segment_path(self.segment_directory, item.object_id), object_id=item.object_id).frames
        except (SegmentFileError, OSError) as error:
            logger.error("cannot spill object %s from its segment file: %s", item.object_id.hex(), error)
            return None

    def _write(self, item: WriteFile, buffers: list[memoryview]) -> None:
        assert self.directory is not None
        if not self._closing or (item.frames is None and (item.object_id, item.generation) in self._kept):
            write_object_file(self.directory, item.object_id, item.generation, item.owner_id, item.name, buffers)

    def _write_done(self, item: WriteFile, done: asyncio.Future[None]) -> None:
        if done.cancelled() or self._closing:
            return
        error = done.exception()
        if error is not None and not isinstance(error, OSError):
            logger.error("writing spill file %s failed: %r", self._path(item), error)
        self._written(item.object_id, item.generation, None if error is None else _reason(error))

    def _write_segment(self, item: WriteSegment) -> None:
        assert self.segment_directory is not None
        if self._closing:
            raise OSError("the server is stopping")
        path = os.path.join(self.segment_directory, segment_files.temporary_name(item.object_id, item.token))
        segment_files.write_segment(path, item.object_id, item.owner_id, item.name, [_buffer(f) for f in item.frames])

    def _segment_write_done(self, item: WriteSegment, done: asyncio.Future[None]) -> None:
        if done.cancelled() or self._closing or self._segment_written is None:
            return
        error = done.exception()
        if error is not None and not isinstance(error, OSError):
            logger.error("writing the segment file of object %s failed: %r", item.object_id.hex(), error)
        self._segment_written(item.object_id, item.generation, None if error is None else _reason(error))

    def _read_file(self, item: ReadFile) -> tuple[list[memoryview], bool]:
        """The spill file's frames; with a segment token, written into that temporary segment file first, and then
        the views of its map (the spill file's map goes). A segment file that cannot be written (the directory is
        full) leaves the frames of the spill file: the object is then held in the server's memory."""
        assert self.directory is not None
        frames = read_object_file(self.directory, item.object_id, item.generation, item.total_bytes)
        if not item.segment_token or self._closing:
            return frames, False
        assert self.segment_directory is not None
        path = os.path.join(self.segment_directory, segment_files.temporary_name(item.object_id, item.segment_token))
        try:
            segment_files.write_segment(path, item.object_id, item.owner_id, item.name, frames)
            return map_segment(path, object_id=item.object_id).frames, True
        except (SegmentFileError, OSError) as error:
            logger.warning("object %s read back into the server's memory: its segment file: %s", item.object_id.hex(),
                           _reason(error))  # fmt: skip
            segment_files.remove_file(path)
            return frames, False

    def _read_done(self, item: ReadFile, done: asyncio.Future[tuple[list[memoryview], bool]]) -> None:
        if done.cancelled() or self._closing:
            return
        error = done.exception()
        if error is None:
            frames, in_segment = done.result()
            self._read(item.object_id, item.generation, frames, "", in_segment)
            return
        problem = str(error) if isinstance(error, SpillFileError) else f"could not be read: {error}"
        logger.warning(
            "discarding spill file %s: %s (object %s is lost)", self._path(item), problem, item.object_id.hex()
        )
        self._read(item.object_id, item.generation, None, problem, False)

    def _remove_done(self, item: RemoveFile, done: asyncio.Future[None]) -> None:
        if not done.cancelled() and done.exception() is not None:
            logger.warning("could not remove spill file %s: %s", self._path(item), done.exception())

    def _path(self, item: WriteFile | ReadFile | RemoveFile) -> str:
        assert self.directory is not None
        return object_path(self.directory, item.object_id, item.generation)


def _check_head(path: str, item: AdoptSegment) -> None:
    head = segment_files.read_head_of_file(path)
    if head.object_id != bytes(item.object_id):
        raise SegmentFileError(f"it holds object {head.object_id.hex()}")
    if head.owner_id != bytes(item.owner_id) or head.total_bytes != item.total_bytes:
        raise SegmentFileError(
            f"its header says owner {head.owner_id!r} and {head.total_bytes} bytes, the request {item.owner_id!r} and "
            f"{item.total_bytes}"
        )
