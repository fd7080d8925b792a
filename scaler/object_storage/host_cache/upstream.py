"""A host cache's work against its upstream storage server (cache_rules.py's `Fetch`, `Upload`, `Check`), carried out
on threads, each with a connection of its own, and reported back to the server's event loop.

A fetch reads the object with getInParts (`ObjectStorageConnection.read_in_parts`) straight into a file written for
adoption in the cache's segment directory (the one copy of the fetch: from the socket into shared memory), telling
the service when the file is begun (the upstream's header names the frames: readers follow it from then on), how far
it is written, and when it is whole (then adopted). An object under SEGMENT_FROM_BYTES is put into the store instead.
An upload puts the frames the shell took from the store; a check asks `exists`.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scaler.errors import IncompatiblePeerError, MissingObjects, ObjectStorageException, ObjectStorageFullError
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.connection import ObjectInParts, ObjectStorageConnection
from scaler.object_storage.host_cache.cache_rules import Check, Fetch
from scaler.object_storage.segment_files import PUT_SUFFIX, layout, remove_file
from scaler.object_storage.spill_files import file_stem
from scaler.object_storage.store import SEGMENT_FROM_BYTES
from scaler.protocol.storage_messages import StorageStatus

logger = logging.getLogger(__name__)

#: How many fetches, uploads and checks run at once (each thread has its own upstream connection).
UPSTREAM_THREADS = 4
#: A fetch tells the service how far it got at least every this many bytes (its followers get the pieces written).
PROGRESS_BYTES = 4 << 20

_numbers = itertools.count(1)


@dataclass(frozen=True, slots=True)
class UploadJob:
    """An upload with what it puts: the frames as stored here (held until the upstream answered)."""

    object_id: bytes
    generation: int
    owner_id: bytes
    name: str
    frames: Sequence[Any]


Job = Fetch | UploadJob | Check


class UpstreamReports(Protocol):
    """What the server's shell is told, on its event loop's thread (host_cache/glue.py)."""

    def fetch_begun(self, object_id: bytes, file_name: str, frame_bytes: tuple[int, ...]) -> bool: ...

    def fetch_progress(self, object_id: bytes, written: int) -> None: ...

    def fetch_whole(self, object_id: bytes, file_name: str, total: int) -> None: ...

    def fetch_small(self, object_id: bytes, frames: list[bytes]) -> None: ...

    def fetch_failed(self, object_id: bytes, reason: str) -> None: ...

    def uploaded(self, object_id: bytes, generation: int, status: StorageStatus, reason: str) -> None: ...

    def checked(self, object_id: bytes, exists: bool | None, reason: str) -> None: ...


class Upstream:
    """The threads that carry out the upstream work. `on_loop(call)` runs a report on the event loop's thread and, for
    `fetch_begun`, waits for its answer (`call_on_loop_and_wait`)."""

    def __init__(
        self,
        address: str,
        segment_directory: str,
        reports: UpstreamReports,
        on_loop: Callable[[Callable[[], Any]], Any],
        security: TransportSecurity | None = None,
        timeout_seconds: float = 60.0,
        threads: int = UPSTREAM_THREADS,
    ) -> None:
        self.address = address
        self._directory = segment_directory
        self._reports = reports
        self._on_loop = on_loop
        self._security = security
        self._timeout_seconds = timeout_seconds
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._run, name=f"scaler-cache-upstream-{n}", daemon=True) for n in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(timeout=5)

    def _run(self) -> None:
        connection = ObjectStorageConnection(
            self.address, role="worker", timeout_seconds=self._timeout_seconds, security=self._security,
            map_local=False,
        )  # fmt: skip
        try:
            while (job := self._jobs.get()) is not None:
                self._carry_out(connection, job)
        finally:
            connection.close()

    def _carry_out(self, connection: ObjectStorageConnection, job: Job) -> None:
        if isinstance(job, Fetch):
            self._fetch(connection, job.object_id)
        elif isinstance(job, UploadJob):
            status, reason = _upload(connection, job)
            self._on_loop(lambda: self._reports.uploaded(job.object_id, job.generation, status, reason))
        else:
            exists: bool | None
            try:
                exists, reason = connection.exists(job.object_id), ""
            except ObjectStorageException as error:
                exists, reason = None, f"the upstream storage could not be asked: {error}"
            self._on_loop(lambda: self._reports.checked(job.object_id, exists, reason))

    def _fetch(self, connection: ObjectStorageConnection, object_id: bytes) -> None:
        try:
            connection.read_in_parts(object_id, lambda source: self._copy(object_id, source))
        except MissingObjects as error:
            missing = str(error)
            self._on_loop(lambda: self._reports.fetch_failed(object_id, missing))
        except (ObjectStorageException, OSError) as error:
            reason = f"reading it from the upstream storage at {self.address} failed: {error}"
            logger.warning("object %s: %s", object_id.hex(), reason)
            self._on_loop(lambda: self._reports.fetch_failed(object_id, reason))

    def _copy(self, object_id: bytes, source: ObjectInParts) -> None:
        """Consume one answer (called again when the answer started over): into memory when small, else into a file
        of the segment directory, which readers follow as it is written and which is then adopted."""
        frame_bytes = tuple(source.frame_bytes)
        total = sum(frame_bytes)
        if total < SEGMENT_FROM_BYTES:
            frames = [_read_exactly(source, length) for length in frame_bytes]
            self._on_loop(lambda: self._reports.fetch_small(object_id, frames))
            return
        file_name = f"{file_stem(object_id)}.fetch{os.getpid()}-{next(_numbers)}{PUT_SUFFIX}"
        path = os.path.join(self._directory, file_name)
        head_bytes, head = layout(object_id, b"", "", frame_bytes)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(descriptor, head.file_bytes)
            os.pwrite(descriptor, head_bytes, 0)
            if not self._on_loop(lambda: self._reports.fetch_begun(object_id, file_name, frame_bytes)):
                remove_file(path)  # stored meanwhile, or being written by another: the service answered its readers
                return
            with mmap.mmap(descriptor, head.file_bytes) as mapped:
                self._fill(object_id, source, memoryview(mapped), head.frames)
        except BaseException:
            remove_file(path)
            raise
        finally:
            os.close(descriptor)
        self._on_loop(lambda: self._reports.fetch_whole(object_id, file_name, total))

    def _fill(
        self, object_id: bytes, source: ObjectInParts, view: memoryview, frames: Sequence[tuple[int, int]]
    ) -> None:
        written = reported = 0
        try:
            for offset, length in frames:
                done = 0
                while done < length:
                    count = source.readinto(view[offset + done : offset + length])
                    if count == 0:
                        raise ObjectStorageException(f"the upstream storage at {self.address} sent a truncated object")
                    done += count
                    written += count
                    if written - reported >= PROGRESS_BYTES:
                        reported = written
                        self._on_loop(lambda at=written: self._reports.fetch_progress(object_id, at))  # type: ignore[misc]
        finally:
            view.release()


def _read_exactly(source: ObjectInParts, length: int) -> bytes:
    data = bytearray(length)
    view = memoryview(data)
    done = 0
    while done < length:
        count = source.readinto(view[done:])
        if count == 0:
            raise ObjectStorageException("the upstream storage sent a truncated object")
        done += count
    view.release()
    return bytes(data)


def _upload(connection: ObjectStorageConnection, job: UploadJob) -> tuple[StorageStatus, str]:
    try:
        connection.put(job.object_id, list(job.frames), job.owner_id, job.name)
    except ObjectStorageFullError as error:
        return StorageStatus.FULL, str(error)
    except IncompatiblePeerError as error:
        return StorageStatus.REFUSED, str(error)
    except ObjectStorageException as error:
        return StorageStatus.BAD_REQUEST, f"the upstream storage could not store it: {error}"
    return StorageStatus.OK, ""
