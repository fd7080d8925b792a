"""A host cache's work against its upstream storage server (cache_rules.py's `Fetch`, `UploadWork`, `Check`), carried
out on threads, each with a connection of its own, and reported back to the server's event loop.

A fetch first asks the upstream where to fetch the object from (`source`, host_ledger.py): another host's cache, with
the digests of the object's pieces, or the upstream itself. From another host's cache each piece is checked against
its digest as it comes; a piece that does not match, a source that cannot be reached (no connection within the
storage client's connect deadline), dies, does not answer within the storage timeout or does not have the object
sends the fetch back to the upstream for another source (the failed
one named to it: it names it to nobody again), said once per source in the log; after MAX_SOURCES, or when the
upstream names none, the object comes from the upstream itself. Either way it is read with getInParts
(`ObjectStorageConnection.read_in_parts`) straight into a file written for adoption in the cache's segment directory
(the one copy of the fetch: from the socket into shared memory), telling the service when the file is begun (the
header names the frames: readers follow it from then on, another host's cache among them), how far it is written,
and when it is whole (then adopted). An object under SEGMENT_FROM_BYTES is put into the store instead.
A hold (cache rule C4) tells the upstream that this cache holds a large result and will upload it, with the digests of
its pieces (other hosts' caches fetch it from here meanwhile and check them); an upstream that records no holds (an
older one) is not asked again. An upload puts the frames the shell took from the store; a large one first asks the
upstream for its turn
(upload_admission.py: the storage server admits the hosts' large uploads so that they are stored one after another
when its link limits them); an upstream that gives no turns (an older one) is not asked again, and an ask that fails
otherwise lets the upload go without it. A check asks `exists`.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scaler.errors import (
    IncompatiblePeerError,
    MissingObjects,
    ObjectStorageException,
    ObjectStorageFullError,
)
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.client_core import HeldObjectGone, HoldsUnknown, PieceMismatch, TurnsUnknown, WantsUnknown
from scaler.object_storage.connection import ObjectInParts, ObjectStorageConnection
from scaler.object_storage.host_cache.cache_rules import Check, Fetch
from scaler.object_storage.host_cache.upload_yield import SETTLE_SECONDS, Step, UploadYield
from scaler.object_storage.segment_files import PUT_SUFFIX, layout, remove_file
from scaler.object_storage.spill_files import file_stem
from scaler.object_storage.store import SEGMENT_FROM_BYTES
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    ObjectSource,
    SourceRequest,
    StorageStatus,
    piece_digest,
    piece_digests,
    piece_lengths,
    wire_pieces,
)
from scaler.security.curve import CurveSecurity

logger = logging.getLogger(__name__)

#: How many fetches, small uploads and checks run at once (each thread has its own upstream connection).
UPSTREAM_THREADS = 4
#: Uploads of at least this many bytes go one at a time, in the order they came, on a thread and connection of their
#: own: two results uploaded side by side share the host's link and are both stored only at the end of the pair, where
#: one after the other the first is stored (and its task reported, and its readers served) in half the time, and the
#: second as late as before. Smaller uploads, fetches and checks never wait behind a large one.
LARGE_UPLOAD_BYTES = 1 << 20
#: A fetch tells the service how far it got at least every this many bytes (its followers get the pieces written).
PROGRESS_BYTES = 4 << 20
#: How many other hosts' caches one fetch tries before it reads the object from the upstream.
MAX_SOURCES = 2

_numbers = itertools.count(1)


@dataclass(frozen=True, slots=True)
class UploadJob:
    """An upload with what it puts: the frames as stored here (held until the upstream answered)."""

    object_id: bytes
    generation: int
    owner_id: bytes
    name: str
    frames: Sequence[Any]
    held: bool = False  #: the upstream recorded that this cache holds it (upload_yield.py asks what is wanted of it)
    made_at: float = 0.0  #: when it was asked for (time.monotonic(): a held upload settles from then, upload_yield Y7)


@dataclass(frozen=True, slots=True)
class HoldJob:
    """A hold with what it names: the object's frames as stored here (for its pieces' digests)."""

    object_id: bytes
    generation: int
    owner_id: bytes
    name: str
    frames: Sequence[Any]


Job = Fetch | HoldJob | UploadJob | Check


class UpstreamReports(Protocol):
    """What the server's shell is told, on its event loop's thread (host_cache/glue.py)."""

    def fetch_begun(self, object_id: bytes, file_name: str, frame_bytes: tuple[int, ...], source: str) -> bool: ...

    def fetch_progress(self, object_id: bytes, written: int) -> None: ...

    def fetch_whole(self, object_id: bytes, file_name: str, total: int, source: str) -> None: ...

    def fetch_small(self, object_id: bytes, frames: list[bytes], source: str) -> None: ...

    def fetch_failed(self, object_id: bytes, reason: str) -> None: ...

    def uploaded(self, object_id: bytes, generation: int, status: StorageStatus, reason: str) -> None: ...

    def held(self, object_id: bytes, generation: int, recorded: bool, known: bool) -> None: ...

    def still_stored(self, object_id: bytes, generation: int) -> bool: ...

    def checked(self, object_id: bytes, exists: bool | None, reason: str) -> None: ...


class Upstream:
    """The threads that carry out the upstream work. `on_loop(call)` runs a report on the event loop's thread and
    returns its result."""

    def __init__(
        self,
        address: str,
        segment_directory: str,
        reports: UpstreamReports,
        on_loop: Callable[[Callable[[], Any]], Any],
        security: TransportSecurity | None = None,
        timeout_seconds: float = 60.0,
        threads: int = UPSTREAM_THREADS,
        own_address: str = "",
    ) -> None:
        """`own_address`: where other hosts' caches reach this one (its hello upstream says so, and it asks for
        sources); "": it asks for none."""
        self.address = address
        self._directory = segment_directory
        self._reports = reports
        self._on_loop = on_loop
        self._security = security
        self._timeout_seconds = timeout_seconds
        self._own_address = own_address
        self._own_port = _port_of(own_address)  #: where other hosts read from this cache (0: none)
        self._said: set[str] = set()  #: sources whose failure was logged (once each)
        self._turns = True  #: the upstream gives turns for large uploads (until it answers that it does not)
        #: the upstream says what of a held object is wanted (until it answers that it does not: upload_yield Y5)
        self._wants = True
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._large_uploads: queue.Queue[Job | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._run, args=(self._jobs,), name=f"scaler-cache-upstream-{n}", daemon=True)
            for n in range(threads)
        ]
        self._large_upload_thread = threading.Thread(
            target=self._run, args=(self._large_uploads,), name="scaler-cache-large-uploads", daemon=True
        )
        self._large_upload_thread.start()
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> None:
        large = isinstance(job, UploadJob) and upload_bytes(job) >= LARGE_UPLOAD_BYTES
        (self._large_uploads if large else self._jobs).put(job)

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        self._large_uploads.put(None)
        for thread in [*self._threads, self._large_upload_thread]:
            thread.join(timeout=5)

    def _run(self, jobs: queue.Queue[Job | None]) -> None:
        connection = ObjectStorageConnection(
            self.address, role="cache", timeout_seconds=self._timeout_seconds, security=self._security,
            map_local=False, cache_address=self._own_address,
        )  # fmt: skip
        peers: dict[str, ObjectStorageConnection] = {}
        try:
            while (job := jobs.get()) is not None:
                try:
                    self._carry_out(connection, peers, job)
                except Exception as error:  # a job that fails unexpectedly fails alone: whoever waits is told
                    logger.exception("host cache: %s failed", job)
                    why = repr(error)
                    self._on_loop(lambda job=job, why=why: self._failed(job, why))  # type: ignore[misc]
        finally:
            connection.close()
            for peer in peers.values():
                peer.close()

    def _failed(self, job: Job, why: str) -> None:
        reason = f"the host cache failed: {why}"
        if isinstance(job, Fetch):
            self._reports.fetch_failed(job.object_id, reason)
        elif isinstance(job, UploadJob):
            self._reports.uploaded(job.object_id, job.generation, StorageStatus.BAD_REQUEST, reason)
        elif isinstance(job, HoldJob):
            self._reports.held(job.object_id, job.generation, False, True)
        else:
            self._reports.checked(job.object_id, None, reason)

    def _carry_out(
        self, connection: ObjectStorageConnection, peers: dict[str, ObjectStorageConnection], job: Job
    ) -> None:
        if isinstance(job, Fetch):
            self._fetch(connection, peers, job.object_id)
        elif isinstance(job, UploadJob):
            if upload_bytes(job) >= LARGE_UPLOAD_BYTES:
                held = job.held and self._wants
                settle = max(0.0, SETTLE_SECONDS - (time.monotonic() - job.made_at)) if held else 0.0
                plan = UploadYield(held, settle)
                if not self._yield_to_peers(connection, job, plan):
                    reason = f"object {job.object_id.hex()} was deleted or replaced before its upload began"
                    logger.info("host cache: %s: not uploaded", reason)
                    status = StorageStatus.BAD_REQUEST
                    self._on_loop(lambda: self._reports.uploaded(job.object_id, job.generation, status, reason))
                    return
                if self._turns and self._ask_turn(connection, job):
                    plan.granted()
                    self._yield_to_peers(connection, job, plan)  # reads may have begun while it waited for its turn
            status, reason = _upload(connection, job)
            if status is not StorageStatus.OK:
                logger.warning("host cache: object %s was not stored upstream: %s", job.object_id.hex(), reason)
            self._on_loop(lambda: self._reports.uploaded(job.object_id, job.generation, status, reason))
        elif isinstance(job, HoldJob):
            recorded, known = self._hold(connection, job)
            self._on_loop(lambda: self._reports.held(job.object_id, job.generation, recorded, known))
        else:
            exists: bool | None
            try:
                exists, reason = connection.exists(job.object_id), ""
            except ObjectStorageException as error:
                exists, reason = None, f"the upstream storage could not be asked: {error}"
            self._on_loop(lambda: self._reports.checked(job.object_id, exists, reason))

    def _hold(self, connection: ObjectStorageConnection, job: HoldJob) -> tuple[bool, bool]:
        """Tell the upstream this cache holds the object (held_results.py): (recorded, whether the upstream records
        holds at all)."""
        total = sum(memoryview(frame).nbytes for frame in job.frames)
        try:
            connection.hold(job.object_id, total, job.owner_id, job.name, piece_digests(job.frames))
        except HoldsUnknown as error:
            logger.info("host cache: %s; large results are answered once uploaded", error)
            return False, False
        except ObjectStorageException as error:
            logger.info("host cache: object %s is answered once uploaded: %s", job.object_id.hex(), error)
            return False, True
        return True, True

    def _yield_to_peers(self, connection: ObjectStorageConnection, job: UploadJob, plan: UploadYield) -> bool:
        """Wait while this host sends other hosts what they read, unless a reader waits for the object at the upstream
        (upload_yield.py); False when it is not to be uploaded (deleted upstream, or deleted or replaced here)."""
        while True:
            step, seconds = plan.step(queued_to_peers(self._own_port))
            if step is Step.GO:
                break
            if step is Step.SKIP:
                return False
            if step is Step.ASK:
                try:
                    plan.answered(connection.wanted(job.object_id, upload_bytes(job), job.owner_id))
                except HeldObjectGone:
                    plan.answered(None)
                except WantsUnknown as error:
                    self._wants = False
                    logger.info("host cache: %s; uploads wait for other hosts' reads without asking", error)
                    plan.unanswered()
                except ObjectStorageException as error:
                    logger.info(
                        "host cache: object %s: what is wanted of it was not told: %s", job.object_id.hex(), error
                    )
                    plan.unanswered()
                continue
            time.sleep(seconds)
            plan.slept(seconds)
        if plan.turn_granted or not plan.waited:
            return True
        return bool(self._on_loop(lambda: self._reports.still_stored(job.object_id, job.generation)))

    def _ask_turn(self, connection: ObjectStorageConnection, job: UploadJob) -> bool:
        """Wait for the upstream to admit the upload (upload_admission.py): whether it did; without a turn, it goes
        anyway."""
        try:
            connection.ask_turn(job.object_id, upload_bytes(job), job.owner_id, job.name)
        except TurnsUnknown as error:
            self._turns = False
            logger.info("host cache: %s; large results are uploaded without asking", error)
        except ObjectStorageException as error:
            logger.info("host cache: object %s is uploaded without its turn: %s", job.object_id.hex(), error)
        else:
            return True
        return False

    def _fetch(
        self, connection: ObjectStorageConnection, peers: dict[str, ObjectStorageConnection], object_id: bytes
    ) -> None:
        if self._from_another_host(connection, peers, object_id):
            return
        try:
            connection.read_in_parts(object_id, lambda parts: self._copy(object_id, parts))
        except MissingObjects as error:
            missing = str(error)
            self._on_loop(lambda: self._reports.fetch_failed(object_id, missing))
        except (ObjectStorageException, OSError) as error:
            reason = f"reading it from the upstream storage at {self.address} failed: {error}"
            logger.warning("object %s: %s", object_id.hex(), reason)
            self._on_loop(lambda: self._reports.fetch_failed(object_id, reason))

    def _from_another_host(
        self, connection: ObjectStorageConnection, peers: dict[str, ObjectStorageConnection], object_id: bytes
    ) -> bool:
        """Fetch the object from the caches of other hosts the upstream names; False when none gave it."""
        failed = ""
        for _ in range(MAX_SOURCES if self._own_address else 0):
            try:
                source = connection.call(SourceRequest(ObjectID(object_id), failed)).reply.value
            except ObjectStorageException:
                return False  # the upstream's own read says what is wrong
            if not isinstance(source, ObjectSource) or not source.address:
                return False
            digests = source.piece_digests
            try:
                peer = peers.get(source.address) or peers.setdefault(source.address, self._peer(source.address))
                address = source.address
                peer.read_in_parts(object_id, lambda parts: self._copy(object_id, parts, digests, address))  # noqa: B023
                return True
            except (ObjectStorageException, OSError) as error:
                self._source_failed(object_id, source.address, error)
                failed = source.address
                peers.pop(source.address).close()
        return False

    def _peer(self, address: str) -> ObjectStorageConnection:
        """A connection to another host's cache, with the workers' keys (it serves with their pair)."""
        security = self._security
        if isinstance(security, CurveSecurity):
            security = CurveSecurity(security.public, security.secret, security.public)
        return ObjectStorageConnection(
            address, role="cache", timeout_seconds=self._timeout_seconds, security=security, map_local=False
        )

    def _source_failed(self, object_id: bytes, address: str, error: BaseException) -> None:
        if address not in self._said:
            self._said.add(address)
            logger.warning(
                "object %s: fetching it from the host cache at %s failed (%s): fetching it elsewhere (said once for "
                "that cache)", object_id.hex(), address, error,
            )  # fmt: skip
        else:
            logger.info("object %s: fetching it from the host cache at %s failed (%s)", object_id.hex(), address, error)

    def _copy(self, object_id: bytes, source: ObjectInParts, digests: Sequence[bytes] = (), address: str = "") -> None:
        """Consume one answer (called again when the answer started over): into memory when small, else into a file
        of the segment directory, which readers follow as it is written and which is then adopted. With `digests`
        (another host's cache at `address` sends it), each piece is checked against its digest as it comes."""
        frame_bytes = tuple(source.frame_bytes)
        total = sum(frame_bytes)
        check = _Check(digests, frame_bytes) if digests else None
        if total < SEGMENT_FROM_BYTES:
            frames = [_read_exactly(source, length) for length in frame_bytes]
            if check is not None:
                check.frames(frames)
            self._on_loop(lambda: self._reports.fetch_small(object_id, frames, address))
            return
        file_name = f"{file_stem(object_id)}.fetch{os.getpid()}-{next(_numbers)}{PUT_SUFFIX}"
        path = os.path.join(self._directory, file_name)
        head_bytes, head = layout(object_id, b"", "", frame_bytes)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(descriptor, head.file_bytes)
            os.pwrite(descriptor, head_bytes, 0)
            if not self._on_loop(lambda: self._reports.fetch_begun(object_id, file_name, frame_bytes, address)):
                remove_file(path)  # stored meanwhile, or being written by another: the service answered its readers
                return
            with mmap.mmap(descriptor, head.file_bytes) as mapped:
                self._fill(object_id, source, memoryview(mapped), head.frames, check)
        except BaseException:
            remove_file(path)
            raise
        finally:
            os.close(descriptor)
        self._on_loop(lambda: self._reports.fetch_whole(object_id, file_name, total, address))

    def _fill(
        self,
        object_id: bytes,
        source: ObjectInParts,
        view: memoryview,
        frames: Sequence[tuple[int, int]],
        check: _Check | None,
    ) -> None:
        """Read the frames into their places in the file, piece by piece (each checked, with `check`)."""
        written = reported = 0
        piece = view[0:0]
        try:
            for offset, length in frames:
                for start in range(0, length, WIRE_PIECE_BYTES) if length else (0,):
                    piece.release()
                    piece = view[offset + start : offset + min(length, start + WIRE_PIECE_BYTES)]
                    _read_into(source, piece)
                    if check is not None:
                        check.piece(piece)
                    written += len(piece)
                    if written - reported >= PROGRESS_BYTES:
                        reported = written
                        self._on_loop(lambda at=written: self._reports.fetch_progress(object_id, at))  # type: ignore[misc]
        finally:
            piece.release()  # no view of the map outlives this (an exception's frame would keep it otherwise)
            view.release()


class _Check:
    """The digests of an object's pieces, checked in order as the pieces come (PieceMismatch at the first wrong one)."""

    def __init__(self, digests: Sequence[bytes], frame_bytes: Sequence[int]) -> None:
        expected = len(piece_lengths(frame_bytes))
        if len(digests) != expected:
            raise PieceMismatch(f"the source named {len(digests)} piece digests for an object of {expected} pieces")
        self._digests = list(digests)
        self._index = 0

    def piece(self, data: Any) -> None:
        if piece_digest(data) != self._digests[self._index]:
            raise PieceMismatch(f"piece {self._index} of the object does not match its digest")
        self._index += 1

    def frames(self, frames: Sequence[bytes]) -> None:
        for piece in wire_pieces(frames):
            self.piece(piece)


def _read_into(source: ObjectInParts, view: memoryview) -> None:
    done = 0
    while done < len(view):
        count = source.readinto(view[done:])
        if count == 0:
            raise ObjectStorageException("the source sent a truncated object")
        done += count


def _read_exactly(source: ObjectInParts, length: int) -> bytes:
    data = bytearray(length)
    view = memoryview(data)
    _read_into(source, view)
    view.release()
    return bytes(data)


def upload_bytes(job: UploadJob) -> int:
    """The payload bytes an upload puts."""
    return sum(memoryview(frame).nbytes for frame in job.frames)


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


def _port_of(address: str) -> int:
    """The TCP port of a `tcp://host:port` address (0: none, or another transport)."""
    if not address.startswith("tcp://"):
        return 0
    try:
        return int(address.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return 0


def queued_to_peers(port: int) -> int:
    """The bytes waiting to leave in the kernel's send queues of the TCP connections this host serves on `port` (the
    cache's reads for other hosts; ZeroMQ keeps those queues full while it has more to send): 0 when there is no port,
    or no /proc to read it from (then uploads never wait)."""
    if not port:
        return 0
    local = f":{port:04X}"
    queued = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines, None)
                for line in lines:
                    fields = line.split(None, 5)
                    if len(fields) > 4 and fields[1].endswith(local) and fields[3] == "01":  # ESTABLISHED
                        queued += int(fields[4].split(":", 1)[0], 16)
        except OSError:
            continue
    return queued
