"""The object storage server: a ROUTER socket in front of a `StorageService` and its `ObjectStore`.

`serve` is the asyncio shell: it receives with copy=False, so payload frames are kept as the zmq.Frame objects
they arrived in and a get sends those same frames back (zmq shares them by reference count; no byte is copied
on the server). It chooses, locks and adopts its segment directory at start (segment_directory.py: objects from
64 KiB on are files there, in shared memory, which the processes of this host map), and with a spill directory it
also locks and scans that (the objects a previous server left are found there); it hands the store's file work to
a `DiskWorker`, whose results come back here and answer the requests that waited on them. A get of an object held
as a segment file maps the file and sends the map's views (mapped only while zmq sends them).

A peer that vanishes mid-transfer disturbs nobody: ZeroMQ delivers a multipart message whole or not
at all, and a ROUTER (not in mandatory mode) drops replies addressed to a peer that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import zmq

from scaler.config.byte_size import format_byte_size
from scaler.config.sections import ObjectStorageServerConfig
from scaler.io.address import AddressError, parse_address
from scaler.io.event_loop import run
from scaler.io.port_owner import address_in_use_problem
from scaler.io.sockets import PeerRoles, SocketFactory, Sockets, TransportSecurity, bound_endpoint
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.tls import ServerCertificate, TlsFileError
from scaler.io.zmq_async import AsyncSocket, watch_events
from scaler.io.zmq_parts import Frames
from scaler.object_storage import segment_directory
from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.host_cache.cache_rules import FETCHER
from scaler.object_storage.memory_budget import memory_budget
from scaler.object_storage.segment_files import (
    FoundPut,
    SegmentFileError,
    SegmentScan,
    map_segment,
    scan_segment_directory,
    segment_path,
)
from scaler.object_storage.segment_reaper import Reaper, start_reaper
from scaler.object_storage.service import Reply, StorageAnswer, StorageService, bad_request
from scaler.object_storage.spill_files import SpillDirectoryError, lock_spill_directory, scan_spill_directory
from scaler.object_storage.store import IMMEDIATE_WORK, AdoptSegment, ObjectStore, PayloadBuffer
from scaler.object_storage.traffic import SWEEP_SECONDS
from scaler.object_storage.upload_admission import UploadAdmission
from scaler.protocol.codec import encode_storage_reply
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    AdoptOutcomes,
    ObjectSource,
    SegmentDirectory,
    StorageReply,
    StorageStatus,
    WriteBegin,
    piece_digests,
    wire_pieces,
)
from scaler.security.connection_files import STORAGE_SERVICE
from scaler.security.find import ServedAddresses, ServerKeys, server_keys
from scaler.security.key_files import KeyFileError
from scaler.security.tls_settings import server_certificate

if TYPE_CHECKING:
    from scaler.object_storage.host_cache.glue import CacheGlue

logger = logging.getLogger(__name__)

#: How often the object count and bytes are logged (only when they changed).
STATISTICS_INTERVAL_SECONDS = 60.0

#: A write readers follow (followed_writes.py) that makes no progress for between one and two of these is ended: its
#: writer died, and its readers are told so instead of waiting for ever.
WRITE_STALL_SECONDS = 30.0
#: A stopping server waits for the followed writes under way as long as one of their writers is heard from within this.
FINISH_QUIET_SECONDS = 5.0

#: How often the turns for the host caches' uploads are looked at for the bound (upload_admission A4).
ADMISSION_TICK_SECONDS = 1.0

#: Payload frames smaller than this are copied out of their zmq.Frame before being stored: libzmq may
#: receive small messages into a shared buffer, and keeping the frame would pin that whole buffer.
SMALL_FRAME_BYTES = 65536


# ---------------------------------------------------------------- asyncio shell


class ObjectStorageBindError(Exception):
    """The server could not listen on its address (in use, malformed, not permitted)."""


def _bind(sockets: Sockets, address: str) -> zmq.Socket[Any]:
    """The bound ROUTER; raise ObjectStorageBindError with a one-line reason."""
    try:
        parsed = parse_address(address)
    except AddressError as error:
        raise ObjectStorageBindError(f"object storage server cannot listen on {address!r}: {error}") from None
    if parsed.scheme == "inproc":
        raise ObjectStorageBindError(
            f"object storage server cannot listen on {address!r}: use tcp://HOST:PORT or ipc:///PATH "
            f"(inproc is only reachable from inside the server process)"
        )
    try:
        return sockets.router(str(parsed))
    except TunnelError as error:  # a tunnel's port in use, a missing extra
        raise ObjectStorageBindError(f"object storage server: {error}") from None
    except zmq.ZMQError as error:
        reason = address_in_use_problem(str(parsed)) or f"{parsed}: {error.strerror}"
        raise ObjectStorageBindError(f"object storage server cannot listen on {reason}") from None


#: Rejections remembered so each (peer, reason) is logged once; beyond this the memory starts again.
MAX_LOGGED_REJECTIONS = 10_000


def _key_of(frame: Any) -> bytes | None:
    """The z85 public key of the connection a frame came on (CURVE: set by the ZAP handler)."""
    try:
        user_id = frame.get("User-Id")
    except (zmq.ZMQError, ValueError, TypeError, AttributeError):
        return None
    return user_id.encode() if isinstance(user_id, str) and user_id else None


def _storable(frame: Any) -> PayloadBuffer:
    """A received payload frame as it will be kept: the zmq.Frame itself, or a copy when small."""
    if isinstance(frame, zmq.Frame) and len(frame) < SMALL_FRAME_BYTES:
        return frame.bytes
    return frame  # type: ignore[no-any-return]


class _ServerShell:
    """Glues the ROUTER socket, and the disk worker when there is a spill directory, to the StorageService."""

    def __init__(self, service: StorageService, secured: bool = False) -> None:
        self.service = service
        self.socket: AsyncSocket | None = None
        self.disk: DiskWorker | None = None
        self._secured = secured
        self._logged: set[tuple[bytes, str]] = set()  #: (peer, reason) of rejections logged: each once
        self._is_full = False  #: a put was refused for room and none succeeded since (logged once per episode)
        self._write_trouble: str | None = None  #: the last spill write error, until a write succeeds again
        self._segment_trouble: str | None = None  #: the last segment write error, until one succeeds again
        self._writes_finished: asyncio.Event | None = None  #: set once no followed write is under way (stopping)
        #: a host cache's upstream work (host_cache/glue.py); None: a storage server
        self.cache: CacheGlue | None = None
        #: the file descriptor of the connection of each peer that asked for an upload's turn (its end frees the turn)
        self._fd_peers: dict[int, set[bytes]] = {}

    def on_message(self, frames: Frames) -> None:
        peer = frames[0].bytes
        if len(frames) < 2:
            answer: StorageAnswer | None = bad_request(0, "empty message: no request header frame")
        else:
            key = _key_of(frames[1]) if self._secured else None
            payload = [_storable(frame) for frame in frames[2:]]
            if payload:
                self.service.traffic.received(sum(len(frame) for frame in payload))
            answer = self.service.handle(peer, frames[1].bytes, payload, key, time.monotonic())
            if not payload and self.service.watched(peer):  # an upload's turn, or results held (their end matters)
                self._remember_fd(peer, frames[1])
        self.answer_all(self.run_disk_work([] if answer is None else [Reply(peer, answer)]))

    def _remember_fd(self, peer: bytes, frame: Any) -> None:
        try:
            fd = int(frame.get(zmq.SRCFD))
        except (zmq.ZMQError, ValueError, TypeError, AttributeError):
            return
        self._fd_peers.setdefault(fd, set()).add(peer)

    def on_socket_event(self, event: int, value: int) -> None:
        """A connection ended (`value`: its file descriptor): the turns its peers held or asked for go, and the results
        they held and had not uploaded are lost (held_results H4). A connection
        accepted on the same descriptor whose ask was read before this event may lose its turn too: its upload then
        shares the link with the next one, as without turns (never a hang)."""
        peers = self._fd_peers.pop(value, None)
        if peers:
            lost = self.service.connections_ended(sorted(peers), time.monotonic())
            if lost:
                logger.warning(
                    "a host cache's connection ended before it uploaded %d result(s) it held (%s%s): they are lost, "
                    "and their readers wait for their tasks to be run again", len(lost),
                    ", ".join(object_id.hex() for object_id in lost[:4]), ", ..." if len(lost) > 4 else "",
                )  # fmt: skip
            self.answer_all([])

    def admit_by_bound(self) -> None:
        """Grant the turns the bound lets go (upload_admission A4)."""
        self.service.admission_tick(time.monotonic())
        self.answer_all([])

    def on_written(self, object_id: bytes, generation: int, error: str | None) -> None:
        if error is not None and error != self._write_trouble:
            assert self.disk is not None
            logger.warning(
                "could not write object %s to the spill directory %s: %s; until writes succeed again, objects "
                "stay in memory only, and puts are refused once they fill the budget",
                object_id.hex(), self.disk.directory, error,
            )  # fmt: skip
        elif error is None and self._write_trouble is not None:
            logger.info("writing to the spill directory works again")
        self._write_trouble = error
        self.answer_all(self.run_disk_work(self.service.write_finished(object_id, generation, error)))

    def on_segment_written(self, object_id: bytes, generation: int, error: str | None) -> None:
        if error is not None and error != self._segment_trouble:
            assert self.disk is not None
            logger.warning(
                "could not write object %s to the segment directory %s: %s; until writes succeed again, such objects "
                "are held in this server's memory and sent to every reader", object_id.hex(),
                self.disk.segment_directory, error,
            )  # fmt: skip
        elif error is None and self._segment_trouble is not None:
            logger.info("writing to the segment directory works again")
        self._segment_trouble = error
        self.answer_all(self.run_disk_work(self.service.segment_written(object_id, generation, error)))

    def on_read(
        self,
        object_id: bytes,
        generation: int,
        frames: Sequence[PayloadBuffer] | None,
        problem: str,
        in_segment: bool = False,
    ) -> None:
        replies = self.service.read_finished(object_id, generation, frames, problem, in_segment)
        self.answer_all(self.run_disk_work(replies))

    def answer_all(self, replies: list[Reply]) -> None:
        for reply in replies:
            self._answer(reply.peer, reply.answer)
        self._send_outgoing()
        if self._writes_finished is not None and not self.service.writes.under_way():
            self._writes_finished.set()
        if self.cache is not None:
            self.cache.take_work()
        admission = self.service.admission
        if admission.finished or admission.changes:
            _log_admission(admission)

    def _send_outgoing(self) -> None:
        """What the readers of objects being written are due (followed_writes.py): sent before any further disk work
        is carried out, so that the pieces are read from the files they name before an eviction or a delete moves
        them."""
        for reply in self.service.take_outgoing():
            self._answer(reply.peer, reply.answer)

    def sweep_writes(self) -> None:
        """End the followed writes that stalled (their writers died: followed_writes rule 4)."""
        self.service.sweep_writes()
        self.answer_all([])

    async def finish_writes(self, seconds: float) -> None:
        """A server asked to stop first lets the followed writes under way finish (their objects were announced: with
        a spill directory they are then found again by the next server), for at most `seconds`, and only while their
        writers are heard from (a writer that died, or a write awaiting its writer, holds the stop for
        FINISH_QUIET_SECONDS at most)."""
        writes = self.service.writes
        if not writes.under_way():
            return
        logger.info("stopping once the %d object(s) being written are stored", writes.under_way())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        self._writes_finished = asyncio.Event()
        while writes.under_way() and loop.time() < deadline:
            heard = writes.heard
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._writes_finished.wait(), min(FINISH_QUIET_SECONDS, seconds))
            if writes.heard == heard:
                logger.warning("stopping with %d object(s) still being written: their writers are silent",
                               writes.under_way())  # fmt: skip
                return

    def run_disk_work(self, replies: list[Reply]) -> list[Reply]:
        """Hand the work out until none is left: segment renames and removals at once, in order (an adopt's outcome
        answers its request and may call for more), the rest to the disk worker's threads. Returns `replies` and the
        adopts' to send now: only once the work is done, so that a segment file a reply names is in place, and a
        deleted object's file is gone when its delete is answered."""
        replies = list(replies)
        self._send_outgoing()
        while work := self.service.take_work():
            if self.disk is None:
                continue  # a store without files hands out no work
            threaded = []
            for item in work:
                if not isinstance(item, IMMEDIATE_WORK):
                    threaded.append(item)
                    continue
                if threaded:  # keep the order: what was decided before goes first
                    self.disk.run(threaded)
                    threaded = []
                try:
                    refused = self.disk.carry_out_at_once(item)
                except OSError as error:
                    logger.error("segment directory: %r failed: %s", item, error)
                    continue
                if isinstance(item, AdoptSegment):
                    replies.extend(self.service.adopted(item, refused))
                    self._send_outgoing()
            if threaded:
                self.disk.run(threaded)
        return replies

    def _answer(self, peer: bytes, answer: StorageAnswer) -> None:
        if peer != FETCHER:
            self._answer_peer(peer, answer)
        elif self.cache is not None:  # a host cache's own request (host_cache/glue.py)
            self.cache.answered(answer)

    def _answer_peer(self, peer: bytes, answer: StorageAnswer) -> None:
        self._note(peer, answer)
        assert self.socket is not None
        if answer.file_piece is not None:
            self._send_file_piece(peer, answer)
            return
        if answer.digests:
            self._send_source(peer, answer)
            return
        payload: Sequence[Any] = answer.payload
        if answer.segment:
            payload = self._segment_frames(answer)
            if not payload:
                reason = f"object {answer.segment.hex()} is lost: its segment file cannot be read"
                answer = StorageAnswer(StorageReply(answer.reply.request_id, StorageStatus.NOT_FOUND, reason))
        reply = answer.reply
        if answer.in_parts and sum(len(frame) for frame in payload) > WIRE_PIECE_BYTES:
            self._answer_in_parts(peer, reply, payload)
            return
        if self._secured and any(len(frame) > WIRE_PIECE_BYTES for frame in payload):
            # CURVE encrypts a message whole: a large frame goes in pieces that overlap the transfer; the header names
            # the frames' lengths, so that the reader joins the pieces again
            reply = dataclasses.replace(reply, frame_bytes=tuple(len(frame) for frame in payload))
            payload = wire_pieces(payload)
        self._send([peer, encode_storage_reply(reply), *payload])

    def _answer_in_parts(self, peer: bytes, reply: StorageReply, payload: Sequence[Any]) -> None:
        """A getInParts' object as a header naming its frames and how many messages follow, then each piece (at most
        WIRE_PIECE_BYTES) in a message of its own: ZeroMQ hands a reader a message only once all of it has come, so the
        reader copies each piece to its place while the next ones cross (secured or not; over CURVE, as pieces of one
        message do, each is also encrypted and decrypted while the others cross)."""
        pieces = wire_pieces(payload)
        header = dataclasses.replace(reply, frame_bytes=tuple(len(frame) for frame in payload), parts=len(pieces))
        if not self._send([peer, encode_storage_reply(header)]):
            return
        part = encode_storage_reply(StorageReply(reply.request_id, StorageStatus.OK))
        for piece in pieces:
            if not self._send([peer, part, piece]):
                return

    def _note(self, peer: bytes, answer: StorageAnswer) -> None:
        """What an answer tells the log: puts refused for room (once per episode), and rejections (once each)."""
        status = answer.reply.status
        value = answer.reply.value
        if isinstance(value, AdoptOutcomes):  # an adoptMany's: full when one of its adopts was refused for room
            statuses = {outcome.status for outcome in value.outcomes}
            status = StorageStatus.FULL if StorageStatus.FULL in statuses else max(statuses, key=_severity)
        if status is StorageStatus.FULL:
            if not self._is_full:
                logger.warning("refusing puts: %s", answer.reply.reason or _full_reason(value))
            self._is_full = True
        elif self._is_full and status is StorageStatus.OK and isinstance(value, (AdoptOutcomes, type(None))):
            self._is_full = False
        if answer.is_rejection and (peer, answer.reply.reason) not in self._logged:
            if len(self._logged) >= MAX_LOGGED_REJECTIONS:
                self._logged.clear()
            self._logged.add((peer, answer.reply.reason))
            role = self.service.role_of(peer) or "peer"
            verb = "refused a request from" if status is StorageStatus.REFUSED else "bad request from"
            logger.warning("%s %s %s: %s", verb, role, peer.hex(), answer.reply.reason)

    def _send_source(self, peer: bytes, answer: StorageAnswer) -> None:
        """Where a host cache fetches an object from (host_ledger.py), with the digests of the object's pieces, taken
        from the object as stored here; an object that cannot be read here now is fetched from here."""
        frames = self._segment_frames(answer) if answer.segment else list(answer.payload)
        source = answer.reply.value
        assert isinstance(source, ObjectSource)
        value = ObjectSource(source.address, piece_digests(frames), source.server_key) if frames else ObjectSource()
        self._send([peer, encode_storage_reply(dataclasses.replace(answer.reply, value=value))])

    def _send_file_piece(self, peer: bytes, answer: StorageAnswer) -> None:
        """A part of a followed write's answer: its piece read from the file being written (or its segment file)."""
        piece = answer.file_piece
        assert piece is not None and self.disk is not None and self.disk.segment_directory is not None
        reply = answer.reply
        try:
            descriptor = os.open(os.path.join(self.disk.segment_directory, piece.file_name), os.O_RDONLY)
            try:
                data = os.pread(descriptor, piece.length, piece.offset)
            finally:
                os.close(descriptor)
            if len(data) != piece.length:
                raise OSError(f"{len(data)} of {piece.length} bytes at {piece.offset}")
        except OSError as error:
            reason = f"an object being written cannot be read from {piece.file_name}: {error}"
            self._send([peer, encode_storage_reply(StorageReply(reply.request_id, StorageStatus.NOT_FOUND, reason))])
            return
        self._send([peer, encode_storage_reply(reply), data])

    def _send(self, frames: list[Any]) -> bool:
        assert self.socket is not None
        try:
            self.socket.send(frames, copy=False)
        except zmq.ZMQError as error:
            logger.warning("could not answer peer %s: %s", bytes(frames[0]).hex(), error)
            return False
        if len(frames) > 2:  # payload: counted, to a host cache apart (traffic.py T1)
            to_cache = self.service.role_of(bytes(frames[0])) == "cache"
            self.service.traffic.sent(sum(len(frame) for frame in frames[2:]), to_cache)
        return True

    def _segment_frames(self, answer: StorageAnswer) -> list[memoryview]:
        assert self.disk is not None and self.disk.segment_directory is not None
        try:
            path = segment_path(self.disk.segment_directory, answer.segment)
            return map_segment(path, object_id=answer.segment).frames
        except (SegmentFileError, OSError) as error:
            logger.error("cannot read the segment file of object %s: %s", answer.segment.hex(), error)
            return []

    async def log_statistics_until(self, stop: asyncio.Event, lock: int | None = None) -> None:
        last = None
        while True:
            try:
                await asyncio.wait_for(stop.wait(), STATISTICS_INTERVAL_SECONDS)
                return
            except asyncio.TimeoutError:
                pass
            if lock is not None and self.disk is not None and self.disk.segment_directory is not None:
                segment_directory.touch(lock)  # the directory's server is alive (segment_directory.STALE_SECONDS)
                for path in segment_directory.sweep_put_files(self.disk.segment_directory):
                    logger.info("removed %s: a file written for an adoption that never came", path)
            store = self.service.store
            now = (store.info(), store.memory_bytes, store.disk_bytes)
            if now != last:
                info = now[0]
                logger.info(
                    "storing %d object(s), %d bytes, for %d owner(s); %s in memory, %s in the spill directory",
                    info.object_count, info.total_bytes, info.owner_count,
                    format_byte_size(store.memory_bytes), format_byte_size(store.disk_bytes),
                )  # fmt: skip
                last = now


async def _every(stop: asyncio.Event, seconds: float, call: Callable[[], None]) -> None:
    """Call `call` every `seconds` until `stop` is set."""
    while True:
        try:
            await asyncio.wait_for(stop.wait(), seconds)
            return
        except asyncio.TimeoutError:
            call()


def _log_admission(admission: UploadAdmission) -> None:
    """The turns that ended with their uploads (DEBUG) and the window's changes (INFO): upload_admission.py."""
    for upload in admission.take_finished():
        logger.debug(
            "upload turn: object %s, %d bytes, asked at %.3f, granted at %.3f, stored at %.3f; %.2f upload(s) at "
            "once meanwhile, window %d", upload.object_id.hex(), upload.total_bytes, upload.asked_at,
            upload.granted_at, upload.ended_at, upload.mean_held, upload.window,
        )  # fmt: skip
    for _, before, after, why in admission.take_changes():
        logger.info("host caches' large uploads: %d at once instead of %d (aggregate rates: %s)", after, before, why)


def _severity(status: StorageStatus) -> bool:
    return status is not StorageStatus.OK


def _full_reason(value: object) -> str:
    """The reason of the first adopt an adoptMany's answer says was refused for room."""
    outcomes = value.outcomes if isinstance(value, AdoptOutcomes) else ()
    return next((outcome.reason for outcome in outcomes if outcome.status is StorageStatus.FULL), "")


def _open_store(config: ObjectStorageServerConfig) -> tuple[ObjectStore, str | None, int | None]:
    """The store with its budget and, with a spill directory, what a previous server left there; the spill
    directory's absolute path and its lock file's descriptor. Raises SpillDirectoryError."""
    budget = memory_budget(config.max_memory)
    if config.spill_directory is None:
        logger.info("memory budget %s (%s); no spill directory: objects live in memory only",
                    format_byte_size(budget.bytes), budget.why)  # fmt: skip
        return ObjectStore(budget.bytes), None, None
    directory = os.path.abspath(config.spill_directory)
    lock = lock_spill_directory(directory)
    try:
        scan = scan_spill_directory(directory)
    except OSError as error:
        os.close(lock)
        raise SpillDirectoryError(f"spill directory {directory}: {error}") from None
    for path, why in scan.discarded:
        logger.warning("discarded spill file %s: %s", path, why)
    store = ObjectStore(
        budget.bytes, spills=True, first_generation=max((f.generation for f in scan.found), default=0) + 1
    )
    for found in scan.found:
        store.restore(found.object_id, found.owner_id, found.total_bytes, found.name, found.generation)
    logger.info(
        "memory budget %s (%s); spill directory %s: found %d object(s), %s, left by a previous server",
        format_byte_size(budget.bytes), budget.why, directory, len(scan.found), format_byte_size(store.disk_bytes),
    )  # fmt: skip
    return store, directory, lock


def _open_segments(
    config: ObjectStorageServerConfig, endpoint: str, store: ObjectStore
) -> tuple[str, int, SegmentDirectory, list[FoundPut]] | None:
    """Choose, lock and adopt the segment directory (named after the bound `endpoint`), and restore what it holds into
    the store; the directory, its lock's descriptor, what a hello's reply says of it and the files a previous server's
    peers were writing for adoption (followed_writes rule 6). None (logged) when there is none to use: objects are
    then held in this process, as before segments."""
    place = segment_directory.choose_parent(config.shared_memory_directory, store.budget or 0)
    (logger.warning if place.warning else logger.info)("%s", place.text)
    try:
        directory, lock, note = segment_directory.open_segment_directory(place.parent, endpoint)
        scan = scan_segment_directory(directory)
        description = segment_directory.describe(directory, place.shared_memory)
    except (SpillDirectoryError, OSError) as error:
        logger.warning("no segment directory (%s): objects are held in this server's memory and sent to every reader",
                       error)  # fmt: skip
        return None
    if note:
        logger.warning("segment directory %s: %s", directory, note)
    for path, why in scan.discarded:
        logger.warning("discarded segment file %s: %s", path, why)
    found = adopt_segments(store, directory, scan)
    if found:
        logger.info("segment directory %s: adopted %d object(s) a previous server left", directory, found)
    for path in segment_directory.sweep_stale(place.parent, directory):
        logger.info("removed %s, the segment directory of a server that stopped for good", path)
    return directory, lock, description, scan.puts


def _write_begins(puts: list[FoundPut]) -> list[WriteBegin]:
    """The writes a previous server's peers began, as their writeBegins (followed_writes rule 6)."""
    return [
        WriteBegin(
            ObjectID(put.head.object_id),
            put.head.owner_id,
            put.file_name,
            put.head.total_bytes,
            tuple(length for _, length in put.head.frames),
            put.head.name,
        )
        for put in puts
    ]


def adopt_segments(store: ObjectStore, directory: str, scan: SegmentScan) -> int:
    """Restore the objects of a segment directory's scan into the store (after the spill directory's), and from then
    on hold objects there; returns how many were taken. Files not taken, and those evicted to make room within the
    budget, are removed. The spill files of the objects taken (with a spill directory) are left to the disk worker:
    the store hands them out with its next work."""
    found = 0
    for segment in scan.found:
        if store.restore_segment(segment.object_id, segment.owner_id, segment.total_bytes, segment.name):
            found += 1
        else:  # with a spill directory, the spill files are the truth (ObjectStore.restore_segment)
            os.unlink(segment_path(directory, segment.object_id))
    store.segments = True
    store.evict()
    for removal in store.take_removals():  # room made within the budget: the evicted objects' segment files go
        os.unlink(segment_path(directory, removal.object_id))
    return found


def close_disk_worker(disk: DiskWorker, store: ObjectStore) -> None:
    """A stopping server's file work: the removals that waited for reads queued, then the worker closed, writing the
    queued spill files of the objects still stored that only this server holds (DiskWorker.close)."""
    disk.run(store.abandon_reads())
    disk.close(store.spills_under_way())


def _make_shell(
    loop: asyncio.AbstractEventLoop,
    store: ObjectStore,
    directory: str | None,
    segments: tuple[str, int, SegmentDirectory, list[FoundPut]] | None,
    roles: PeerRoles | None,
    upstream: UpstreamSettings | None,
    endpoint: str,
) -> _ServerShell:
    """The shell over a service of the store, with its disk worker (a spill or segment directory) and, for a host
    cache, its upstream work."""
    described = segments[2] if segments is not None else None
    if described is not None and upstream is not None:  # its peers put or adopt, never writeBegin (cache rule C6)
        described = dataclasses.replace(described, host_cache=True)
    if upstream is not None and segments is None:
        raise SpillDirectoryError("a host cache needs a segment directory (shared memory or a temporary directory)")
    service = StorageService(
        store, roles=roles, segment_directory=described, cache=upstream is not None,
        client_owners=upstream.client_owners if upstream is not None else None,
    )  # fmt: skip
    shell = _ServerShell(service, secured=roles is not None)
    if segments is not None and (recovered := shell.service.recover_writes(_write_begins(segments[3]))):
        logger.info("segment directory %s: %d object(s) being written when a previous server stopped: their "
                    "readers wait for their writers to write them again", segments[0], recovered)  # fmt: skip
    if directory is not None or segments is not None:
        shell.disk = DiskWorker(
            directory, shell.on_written, shell.on_read, segments[0] if segments else None, shell.on_segment_written
        )
        shell.run_disk_work([])  # the spill files of the objects taken from the segment directory (adopt_segments)
    if upstream is not None and segments is not None:
        from scaler.object_storage.host_cache.glue import CacheGlue  # a host cache's only: its client of the upstream

        shell.cache = CacheGlue(
            shell, loop, upstream.address, segments[0], upstream.security, upstream.timeout_seconds, endpoint
        )
    return shell


async def serve(
    config: ObjectStorageServerConfig,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
    sockets: Sockets | None = None,
    write_stall_seconds: float = WRITE_STALL_SECONDS,
    upstream: UpstreamSettings | None = None,
) -> None:
    """Serve until `stop` is set (forever without one). `ready(endpoint)` is called once bound. A followed write
    that makes no progress for `write_stall_seconds` to twice that is ended (its readers told). `upstream`: serve as
    a host cache of that storage server (host_cache/), which needs a segment directory.

    Raises ObjectStorageBindError when the address cannot be bound, SpillDirectoryError when the spill directory
    cannot be used.
    """
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    sockets = sockets if sockets is not None else SocketFactory()
    roles = sockets.security.peer_roles() if sockets.security is not None else None
    lock: int | None = None
    segments: tuple[str, int, SegmentDirectory, list[FoundPut]] | None = None
    reaper: Reaper | None = None
    shell: _ServerShell | None = None
    monitor: AsyncSocket | None = None
    try:
        store, directory, lock = _open_store(config)
        # The factory's ROUTER probes idle links: replies queued for a peer on a half-open connection pin frames.
        sock = _bind(sockets, config.bind_address)
        endpoint = bound_endpoint(sock)
        segments = _open_segments(config, endpoint, store)
        reaper = start_reaper(segments[0]) if segments is not None else None  # removes it if this process is killed
        advertised = endpoint if upstream is not None and upstream.peers else ""
        shell = _make_shell(loop, store, directory, segments, roles, upstream, advertised)
        shell.socket = AsyncSocket(loop, sock, shell.on_message, copy=False)
        monitor = watch_events(loop, sockets.event_monitor(sock, zmq.EVENT_DISCONNECTED), shell.on_socket_event)
        logger.info("%s: object storage server listening on %s", config.identity, endpoint)
        if ready is not None:
            ready(endpoint)
        sweeping = [
            asyncio.ensure_future(_every(stop, write_stall_seconds, shell.sweep_writes)),
            # forget the host caches that stopped reporting (traffic.py T3)
            asyncio.ensure_future(_every(stop, SWEEP_SECONDS, shell.service.traffic.sweep)),
            asyncio.ensure_future(_every(stop, ADMISSION_TICK_SECONDS, shell.admit_by_bound)),
        ]
        try:
            await shell.log_statistics_until(stop, segments[1] if segments is not None else None)
        finally:
            for routine in sweeping:
                routine.cancel()
            await asyncio.gather(*sweeping, return_exceptions=True)
        await shell.finish_writes(write_stall_seconds)
        logger.info("%s: object storage server stopping", config.identity)
    finally:
        if monitor is not None:
            monitor.close()
        if shell is not None and shell.socket is not None:
            shell.socket.close()
        if shell is not None and shell.cache is not None:
            shell.cache.close()
        if shell is not None and shell.disk is not None:
            close_disk_worker(shell.disk, shell.service.store)
        if lock is not None:
            os.close(lock)
        if segments is not None:  # objects in memory go with a server that stops (those spilled stay on disk)
            segment_directory.remove_directory(segments[0])
            os.close(segments[1])
        if reaper is not None:
            reaper.release()
        sockets.close()


@dataclasses.dataclass(frozen=True)
class UpstreamSettings:
    """The storage server a host cache stands in for (host_cache/)."""

    address: str
    security: TransportSecurity | None = None
    timeout_seconds: float = 60.0
    #: the cache's address is one the caches of other hosts reach (it says it upstream, and fetches from them)
    peers: bool = True
    #: with CURVE: the client ids the upstream bound to a client's key (host_cache/keys.py); a client at the cache
    #: may claim only those. None: no client is let in.
    client_owners: Callable[[bytes], frozenset[bytes]] | None = None


def _setup_logging(config: ObjectStorageServerConfig) -> None:
    from scaler.config.logging_setup import setup_logging

    setup_logging(config, "object_storage_server")


async def _serve_until_signalled(
    config: ObjectStorageServerConfig, security: ServerKeys, certificate: ServerCertificate | None = None
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    served: list[ServedAddresses] = []

    def ready(endpoint: str) -> None:  # serve() has said where it listens
        served.append(ServedAddresses(security, {STORAGE_SERVICE: endpoint}))
        served[0].register()  # local clients and workers find the keys for this address

    try:
        sockets = SocketFactory(security=security.security, certificate=certificate)
        await serve(config, ready=ready, stop=stop, sockets=sockets)
    finally:
        for addresses in served:
            addresses.unregister()
        for signum in signals:
            loop.remove_signal_handler(signum)


def run_object_storage_server(config: ObjectStorageServerConfig, security: TransportSecurity | None = None) -> int:
    """Run the server in this process until SIGINT/SIGTERM; returns the exit code. `security`: how its socket
    is secured (None: the CURVE keys of its settings; without any, the user's keys, unless `insecure`)."""
    _setup_logging(config)
    try:
        resolved = ServerKeys(security) if security is not None else server_keys(config, "the object storage server")
        certificate = server_certificate(config, (config.bind_address,))
    except (KeyFileError, TlsFileError) as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    if hasattr(signal, "SIGPIPE"):
        # Python ignores SIGPIPE at startup; restate it so that nothing embedding us can let a peer that
        # vanishes mid-write kill the server (behaviour F6).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        run(_serve_until_signalled(config, resolved, certificate))
    except (ObjectStorageBindError, SpillDirectoryError) as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION  # the address is malformed, in use or not ours; the spill directory unusable
    except KeyboardInterrupt:
        return ExitCode.OK
    return ExitCode.OK


def main() -> None:
    """`python -m scaler.object_storage.server '<ObjectStorageServerConfig as JSON>'`: how local clusters and
    schedulers start object storage without paying for the command line's config loader."""
    from scaler.config.sections import section_from_json

    if not sys.argv[1:] or not sys.argv[1].startswith("{"):
        sys.exit("usage: python -m scaler.object_storage.server '<settings as JSON>'; use scaler_object_storage_server")
    sys.exit(run_object_storage_server(section_from_json(ObjectStorageServerConfig, sys.argv[1])))


if __name__ == "__main__":
    main()
