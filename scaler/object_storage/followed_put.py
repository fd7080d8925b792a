"""The writer's side of a write readers follow (the server's side, and what it promises: followed_writes.py).

A processor on the storage's host stores a large result by writing a segment file and asking for its adoption; its
TaskResult used to leave only then, so a reader far away (a laptop's client) asked for the result only after the
whole write, and the link idled meanwhile. `FollowedPuts.start` writes the file's header, tells the server
(`writeBegin`) and returns: the caller announces the object at once, while this connection's writer thread writes
the payload in steps of PROGRESS_BYTES, reports each (`writeProgress`) and asks for the adoption. A reader that asks
meanwhile waits at the server and, with getInParts, gets each piece once written, so the transfer overlaps the write.

The object counts as stored once its adopt is answered ok; until then `exists` says yes (it was announced: a read
waits for it) and nothing counts it. The writer keeps its own copy of the frames until then: when the storage restarts
mid-write (the server there now no longer knows the write), the whole object is written again to it from that copy
before the write is reported done (followed_rewrite.py; its readers wait at the restarted server: followed_writes
rules 5 and 6). When the write fails for good (the tmpfs is full, the adopt is refused, a delete came first, the
processor dies: the server ends a write that makes no progress), every reader waiting for it is answered `notFound`
naming why, and the object never appears later.

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
from scaler.object_storage.followed_rewrite import Next, Step, after, failed_step
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


@dataclass
class _FollowedWrite:
    writer: SegmentWriter  #: the file of the attempt under way
    object_id: ObjectID
    owner_id: bytes
    name: str
    local: LocalSegments
    buffers: Sequence[Any]  #: the writer's own copy of the frames, kept until the object is stored
    greetings: int  #: the writer connection's greetings when the attempt under way began (followed_rewrite.py)


def followable(buffers: Sequence[Any]) -> bool:
    """The frames are large enough and nobody can change them while they are written (read-only buffers)."""
    views = [memoryview(buffer) for buffer in buffers]
    return sum(view.nbytes for view in views) >= FOLLOW_FROM_BYTES and all(view.readonly for view in views)


class FollowedPuts:
    """Writes readers follow, over a connection of their own (`call`: one request, its ok answer or the error), on a
    thread of their own, one after another. `close` waits for the writes started. `settled` is called (on the writer's
    thread, with no lock held) each time the last write started is finished. `greetings`: how many times a server
    accepted the connection's hello (a write whose request failed after a new greeting is written again whole:
    followed_rewrite.py)."""

    def __init__(
        self,
        call: Callable[[StorageOperation], object],
        close_connection: Callable[[], None],
        settled: Callable[[], None] | None = None,
        greetings: Callable[[], int] = lambda: 0,
    ) -> None:
        self._call = call
        self._close_connection = close_connection
        self._settled = settled
        self._greetings = greetings
        self._jobs: queue.Queue[_FollowedWrite | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._unfinished = 0  #: writes started and not finished (stored, or given up)
        self._finished = threading.Condition(self._lock)

    def start(self, local: LocalSegments, object_id: bytes, owner_id: bytes, name: str, buffers: Sequence[Any]) -> bool:
        """Begin a followed write of the object (its file's header written, the server told); True: the object may be
        announced, this writer's thread writes the rest. False: nothing was begun (the caller puts it as usual)."""
        begin = self._begin(local, object_id, owner_id, name, buffers)
        if begin is None:
            return False
        writer, begin_request = begin
        greetings = self._greetings()  # after the writeBegin's answer: a first hello went with it
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="scaler-followed-puts", daemon=True)
                self._thread.start()
            job = _FollowedWrite(
                writer, begin_request.object_id, begin_request.owner_id, name, local, tuple(buffers), greetings
            )
            self._jobs.put(job)
            self._unfinished += 1
        return True

    def _begin(
        self, local: LocalSegments, object_id: bytes, owner_id: bytes, name: str, buffers: Sequence[Any]
    ) -> tuple[SegmentWriter, WriteBegin] | None:
        """A new file for the object, its header written, and the server told (writeBegin); None: nothing was begun."""
        writer = local.begin(object_id, owner_id, name, buffers)
        if writer is None:
            return None
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
            return None
        return writer, begin

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
        """The object written, again whole to a restarted server as long as `followed_rewrite.AFTER` says so."""
        rewrites = 0
        while True:
            step, why = self._attempt(job)
            action = after(step, rewrites)
            if action is Next.DONE:
                return
            if action is Next.TELL_AND_GIVE_UP:
                self._give_up(job.object_id, why)
                return
            if action is Next.GIVE_UP:
                logger.warning("object %s was not stored: %s", job.object_id.hex(), why)
                return
            rewrites += 1
            logger.warning("object %s: %s; writing it again to the object storage there now (%d)", job.object_id.hex(),
                           why, rewrites)  # fmt: skip
            begun = self._begin(job.local, job.object_id, job.owner_id, job.name, job.buffers)
            if begun is None:  # the server there now refused the writeBegin (or is gone): the object is not stored
                logger.warning("object %s was not stored: its new write could not begin", job.object_id.hex())
                return
            job.writer, job.greetings = begun[0], self._greetings()

    def _attempt(self, job: _FollowedWrite) -> tuple[Step, str]:
        """One attempt: the payload written with progress reports, then the adopt (`followed_rewrite.Step`)."""
        writer, object_id = job.writer, job.object_id
        total = writer.head.total_bytes
        try:
            while writer.written < total:
                self._call(WriteProgress(object_id, writer.write_next(PROGRESS_BYTES)))
            writer.close()
        except OSError as error:  # the file could not be written: its readers are told why
            writer.discard()
            return Step.FILE_FAILED, f"its segment file could not be written: {error}"
        except ScalerError as error:  # the server ended the write (a delete, a stall), or restarted, or is gone
            writer.discard()
            return failed_step(self._greetings() != job.greetings), str(error)
        try:
            self._call(Adopt(object_id, job.owner_id, writer.path.rsplit("/", 1)[-1], total, job.name))
        except ScalerError as error:
            writer.discard()  # gone already when it was adopted or refused; not when the server never answered
            return failed_step(self._greetings() != job.greetings), str(error)
        return Step.STORED, ""

    def _give_up(self, object_id: ObjectID, why: str) -> None:
        logger.warning("object %s was not stored: %s", object_id.hex(), why)
        try:
            self._call(WriteProgress(object_id, 0, why))
        except ScalerError:
            pass  # the server ends it itself once it stalls
