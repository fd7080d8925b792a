"""The host cache's part of the server's shell: the upstream work the service asks for goes to the `Upstream`
threads, and what they report comes back here, on the event loop's thread, as the requests of the cache's own
fetcher (cache_rules.FETCHER) or as the service's upstream answers (`uploaded`, `checked`, `fetch_failed`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from scaler.io.sockets import TransportSecurity
from scaler.object_storage.host_cache.cache_rules import FETCHER, Check, Fetch, HoldWork, UploadWork
from scaler.object_storage.host_cache.ledger import Ledger
from scaler.object_storage.host_cache.reporter import Reporter
from scaler.object_storage.host_cache.upstream import HoldJob, UploadJob, Upstream
from scaler.object_storage.segment_files import SegmentFileError, map_segment, segment_path
from scaler.object_storage.service import Reply, StorageAnswer, StorageService
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    Adopt,
    HostReport,
    HostTraffic,
    Put,
    StorageOperation,
    StorageStatus,
    WriteBegin,
    WriteProgress,
)

logger = logging.getLogger(__name__)

#: How long an upstream thread waits for the event loop to take a report it needs the answer of.
REPORT_WAIT_SECONDS = 30.0

T = TypeVar("T")


class ServerShell(Protocol):
    """What of the server's shell (server._ServerShell) this glue uses."""

    service: StorageService

    def answer_all(self, replies: list[Reply]) -> None: ...

    def run_disk_work(self, replies: list[Reply]) -> list[Reply]: ...


class CacheGlue:
    def __init__(
        self,
        shell: ServerShell,
        loop: asyncio.AbstractEventLoop,
        upstream_address: str,
        segment_directory: str,
        security: TransportSecurity | None = None,
        timeout_seconds: float = 60.0,
        own_address: str = "",
    ) -> None:
        self._shell = shell
        self._loop = loop
        self._directory = segment_directory
        self._requests = itertools.count(1)
        self._pending: dict[int, bytes] = {}  #: the fetcher's request id -> its object
        self.ledger = Ledger()
        self._host = socket.gethostname()
        self.upstream = Upstream(
            upstream_address, segment_directory, self, self._on_loop, security, timeout_seconds, own_address=own_address
        )
        self.reporter = Reporter(
            upstream_address, self.due_report, self._on_loop, security, timeout_seconds, own_address
        )  # what it holds and moves, told the storage server (ledger.py)

    def close(self) -> None:
        self.reporter.close()
        self.upstream.close()

    def due_report(self) -> HostReport | None:
        """The report to send the storage server now, or None when none is due (ledger.py, L3)."""
        service = self._shell.service
        info = service.store.info()
        counts = HostTraffic(
            self._host, held_objects=info.object_count, held_bytes=info.total_bytes,
            bytes_to_hosts=service.traffic.bytes_sent_to_caches,
        )  # fmt: skip
        now = self._loop.time()
        report = self.ledger.report(counts, lambda object_id: service.store.peek(object_id) is not None, now)
        return report if self.ledger.report_due(report, now) else None

    # ------------------------------------------------------------ from the shell

    def take_work(self) -> None:
        """Hand the upstream work the service asked for to the threads."""
        cache = self._shell.service.cache
        assert cache is not None
        for work in cache.take_work():
            if isinstance(work, (Fetch, Check)):
                self.upstream.submit(work)
            elif isinstance(work, UploadWork):
                job = self._upload_job(work)
                if isinstance(job, str):
                    self.uploaded(work.object_id, work.generation, StorageStatus.BAD_REQUEST, job)
                else:
                    self.upstream.submit(job)
            else:
                job = self._upload_job(work)
                if isinstance(job, str):  # deleted or replaced meanwhile: its puts wait for the upload's refusal
                    self.held(work.object_id, work.generation, False, True)
                else:
                    self.upstream.submit(HoldJob(job.object_id, job.generation, job.owner_id, job.name, job.frames))

    def answered(self, answer: StorageAnswer) -> None:
        """The answer to one of the fetcher's requests: one that failed ends the fetch (rule C3)."""
        object_id = self._pending.pop(answer.reply.request_id, None)
        if object_id is None or answer.reply.status is StorageStatus.OK:
            return
        logger.warning("object %s: its fetched copy was not stored: %s", object_id.hex(), answer.reply.reason)
        self._shell.service.fetch_failed(object_id, answer.reply.reason)

    # ------------------------------------------------------------ reports of the upstream threads (UpstreamReports)

    def fetch_begun(self, object_id: bytes, file_name: str, frame_bytes: tuple[int, ...], source: str) -> bool:
        begin = WriteBegin(ObjectID(object_id), b"", file_name, sum(frame_bytes), frame_bytes, "")
        begun = self._request(object_id, begin, keep=False) is StorageStatus.OK
        if begun:
            self.ledger.begun(object_id, source, sum(frame_bytes), self._loop.time())
        return begun

    def fetch_progress(self, object_id: bytes, written: int) -> None:
        self.ledger.progress(object_id, written)
        self._request(object_id, WriteProgress(ObjectID(object_id), written), keep=False)

    def fetch_whole(self, object_id: bytes, file_name: str, total: int, source: str) -> None:
        self.ledger.fetched(object_id, total, source)
        self._request(object_id, Adopt(ObjectID(object_id), b"", file_name, total, ""))

    def fetch_small(self, object_id: bytes, frames: list[bytes], source: str) -> None:
        total = sum(len(frame) for frame in frames)
        self.ledger.fetched(object_id, total, source)
        self._request(object_id, Put(ObjectID(object_id), b"", total, ""), frames)

    def fetch_failed(self, object_id: bytes, reason: str) -> None:
        self.ledger.failed(object_id)
        self._shell.service.fetch_failed(object_id, reason)
        self._shell.answer_all([])

    def uploaded(self, object_id: bytes, generation: int, status: StorageStatus, reason: str) -> None:
        if status is StorageStatus.OK:
            stored = self._shell.service.store.get(object_id)
            self.ledger.uploaded(object_id, stored.total_bytes if stored is not None else 0)
        self._shell.answer_all(self._shell.service.uploaded(object_id, generation, status, reason))

    def held(self, object_id: bytes, generation: int, recorded: bool, known: bool) -> None:
        service = self._shell.service
        assert service.cache is not None
        if not known:
            service.cache.holds = False
        self._shell.answer_all(service.held_answer(object_id, generation, recorded))

    def still_stored(self, object_id: bytes, generation: int) -> bool:
        """Whether the object is stored here as it was when its upload was asked for (a yielding upload's check)."""
        stored = self._shell.service.store.get(object_id)
        return stored is not None and stored.generation == generation

    def checked(self, object_id: bytes, exists: bool | None, reason: str) -> None:
        self._shell.answer_all(self._shell.run_disk_work(self._shell.service.checked(object_id, exists, reason)))

    # ------------------------------------------------------------ inside

    def _request(
        self, object_id: bytes, operation: StorageOperation, payload: Sequence[Any] = (), keep: bool = True
    ) -> StorageStatus | None:
        """One request of the fetcher, carried out as any peer's; its status when answered at once. `keep`: its answer,
        when it comes later, is checked (`answered`)."""
        request_id = next(self._requests)
        self._pending[request_id] = object_id
        answer = self._shell.service.act(FETCHER, request_id, operation, payload)
        if answer is not None:
            self.answered(answer)
        elif not keep:
            self._pending.pop(request_id, None)
        self._shell.answer_all(self._shell.run_disk_work([]))
        return None if answer is None else answer.reply.status

    def _upload_job(self, work: UploadWork | HoldWork) -> UploadJob | str:
        """The frames an upload puts, as stored here now; or why there are none."""
        stored = self._shell.service.store.get(work.object_id)
        if stored is None or stored.generation != work.generation:
            return f"object {work.object_id.hex()} was deleted or replaced before it was stored upstream"
        frames: Sequence[Any] | None = stored.frames
        if frames is None:
            try:
                frames = map_segment(segment_path(self._directory, work.object_id), object_id=work.object_id).frames
            except (SegmentFileError, OSError) as error:
                return f"object {work.object_id.hex()} could not be read to be stored upstream: {error}"
        held = isinstance(work, UploadWork) and work.held
        return UploadJob(work.object_id, work.generation, stored.owner_id, stored.name, frames, held, time.monotonic())

    def _on_loop(self, call: Callable[[], T]) -> T:
        """Run a report on the event loop's thread (called from an upstream thread) and wait for its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(call())
            except BaseException as error:
                logger.exception("host cache: a report of the upstream threads failed")
                future.set_exception(error)

        self._loop.call_soon_threadsafe(run)
        return future.result(timeout=REPORT_WAIT_SECONDS)
