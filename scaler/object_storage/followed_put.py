"""The writer's side of a write readers follow (the server's side, and what it promises: followed_writes.py).

A processor on the storage's host stores a large result by writing a segment file and asking for its adoption; its
TaskResult used to leave only then, so a reader far away (a laptop's client) asked for the result only after the
whole write, and the link idled meanwhile. `FollowedPuts.start` writes the file's header, tells the server
(`writeBegin`) and returns: the caller announces the object at once, while this connection's writer thread writes
the payload in steps of PROGRESS_BYTES, reports each (`writeProgress`) and asks for the adoption. A reader that asks
meanwhile waits at the server and, with getInParts, gets each piece once written, so the transfer overlaps the write.

The object counts as stored once its adopt is answered ok; until then `exists` says no. When the write fails (the
tmpfs is full, the adopt is refused, the processor dies: the server ends a write that makes no progress), every
reader waiting for it is answered `notFound` naming why, and the object never appears later.

The processor (worker/processor/process.py) announces such a result at once, on its own link or through its agent,
and tells its agent first that it is still writing (ProcessorWriting), and again once `settled` is called back (every
write started is finished): until then its agent neither gives it another task nor retires it (a SIGKILL) mid-write;
only a real death (a crash, the worker killed) loses a result announced and not yet stored, and its readers are then
told so. Only frames nobody can change (read-only buffers: `bytes`, a serializer's pickle stream) are written so,
since other tasks of the processor (parked ones) may run meanwhile.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scaler.errors import ScalerError
from scaler.object_storage.segment_files import SegmentWriter
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import Adopt, StorageOperation, WriteBegin, WriteProgress

if TYPE_CHECKING:
    from scaler.object_storage.local_segments import LocalSegments

logger = logging.getLogger(__name__)

#: Objects from this size on are written so that readers follow them (smaller ones are written before they are
#: announced: a far reader gains little, and each write costs a thread's hand-over).
FOLLOW_FROM_BYTES = 4 * 1024 * 1024

#: The payload written between two progress reports.
PROGRESS_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class _FollowedWrite:
    writer: SegmentWriter
    object_id: ObjectID
    owner_id: bytes
    name: str


def followable(buffers: Sequence[Any]) -> bool:
    """The frames are large enough and nobody can change them while they are written (read-only buffers)."""
    views = [memoryview(buffer) for buffer in buffers]
    return sum(view.nbytes for view in views) >= FOLLOW_FROM_BYTES and all(view.readonly for view in views)


class FollowedPuts:
    """Writes readers follow, over a connection of their own (`call`: one request, its ok answer or the error), on a
    thread of their own, one after another. `close` waits for the writes started. `settled` is called (on the writer's
    thread, with no lock held) each time the last write started is finished."""

    def __init__(
        self,
        call: Callable[[StorageOperation], object],
        close_connection: Callable[[], None],
        settled: Callable[[], None] | None = None,
    ) -> None:
        self._call = call
        self._close_connection = close_connection
        self._settled = settled
        self._jobs: queue.Queue[_FollowedWrite | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._unfinished = 0  #: writes started and not finished (stored, or given up)
        self._finished = threading.Condition(self._lock)

    def start(self, local: LocalSegments, object_id: bytes, owner_id: bytes, name: str, buffers: Sequence[Any]) -> bool:
        """Begin a followed write of the object (its file's header written, the server told); True: the object may be
        announced, this writer's thread writes the rest. False: nothing was begun (the caller puts it as usual)."""
        writer = local.begin(object_id, owner_id, name, buffers)
        if writer is None:
            return False
        file_name = writer.path.rsplit("/", 1)[-1]
        frames = tuple(length for _, length in writer.head.frames)
        begin = WriteBegin(
            ObjectID(bytes(object_id)), bytes(owner_id), file_name, writer.head.total_bytes, frames, name
        )
        try:
            self._call(begin)
        except ScalerError as error:  # refused, malformed for this server, not answered: written as before
            writer.discard()
            logger.debug("writeBegin of %s refused (%s): written before it is announced", object_id.hex(), error)
            return False
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="scaler-followed-puts", daemon=True)
                self._thread.start()
            self._jobs.put(_FollowedWrite(writer, begin.object_id, begin.owner_id, name))
            self._unfinished += 1
        return True

    @property
    def writing(self) -> bool:
        """Whether a write started is not finished yet."""
        with self._lock:
            return self._unfinished > 0

    def wait(self) -> None:
        """Until every write started is finished (the object stored, or given up and its readers told)."""
        with self._lock:
            while self._unfinished:
                self._finished.wait()

    def close(self) -> None:
        """Wait for the writes started, then close the connection."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._jobs.put(None)
        if thread is not None:
            thread.join()
        self._close_connection()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                self._write(job)
            except Exception:  # never the thread: the next writes and `wait` depend on it
                logger.exception("object %s was not stored", job.object_id.hex())
                job.writer.discard()
            finally:
                with self._lock:
                    self._unfinished -= 1
                    self._finished.notify_all()
                    settled = self._unfinished == 0
                if settled and self._settled is not None:
                    try:
                        self._settled()
                    except Exception:  # never the thread (the processor's channel closed: it is ending)
                        logger.debug("the writes' settling could not be told", exc_info=True)

    def _write(self, job: _FollowedWrite) -> None:
        writer, object_id = job.writer, job.object_id
        total = writer.head.total_bytes
        try:
            while writer.written < total:
                self._call(WriteProgress(object_id, writer.write_next(PROGRESS_BYTES)))
            writer.close()
        except OSError as error:  # the file could not be written: its readers are told why
            writer.discard()
            self._give_up(object_id, f"its segment file could not be written: {error}")
            return
        except ScalerError as error:  # the server ended the write (a delete, a stall) or is gone
            writer.discard()
            logger.warning("object %s was not stored: %s", object_id.hex(), error)
            return
        try:
            self._call(Adopt(object_id, job.owner_id, writer.path.rsplit("/", 1)[-1], total, job.name))
        except ScalerError as error:
            writer.discard()  # gone already when it was adopted or refused; not when the server never answered
            logger.warning("object %s was not stored: %s", object_id.hex(), error)

    def _give_up(self, object_id: ObjectID, why: str) -> None:
        logger.warning("object %s was not stored: %s", object_id.hex(), why)
        try:
            self._call(WriteProgress(object_id, 0, why))
        except ScalerError:
            pass  # the server ends it itself once it stalls
