"""The object storage server: a ROUTER socket in front of a `StorageService` and its `ObjectStore`.

`serve` is the asyncio shell: it receives with copy=False, so payload frames are kept as the zmq.Frame objects
they arrived in and a get sends those same frames back (zmq shares them by reference count; no byte is copied
on the server). With a spill directory it also locks and scans the directory at start (the objects a previous
server left are found there), and hands the store's disk work to a `DiskWorker`, whose results come back here
and answer the requests that waited on them.

A peer that vanishes mid-transfer disturbs nobody: ZeroMQ delivers a multipart message whole or not
at all, and a ROUTER (not in mandatory mode) drops replies addressed to a peer that is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from scaler.config.byte_size import format_byte_size
from scaler.config.sections import ObjectStorageServerConfig
from scaler.io.address import AddressError, parse_address
from scaler.io.event_loop import run
from scaler.io.port_owner import address_in_use_problem
from scaler.io.sockets import SocketFactory, Sockets, TransportSecurity, bound_endpoint
from scaler.io.zmq_async import AsyncSocket, Frames
from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.memory_budget import memory_budget
from scaler.object_storage.service import Answer, StorageService, bad_request
from scaler.object_storage.spill_files import SpillDirectoryError, lock_spill_directory, scan_spill_directory
from scaler.object_storage.store import ObjectStore, PayloadBuffer
from scaler.protocol.codec import encode_storage_reply
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.protocol.storage_messages import StorageStatus
from scaler.security.connection_files import STORAGE_SERVICE
from scaler.security.find import ServedAddresses, ServerKeys, server_keys
from scaler.security.key_files import KeyFileError

logger = logging.getLogger(__name__)

#: How often the object count and bytes are logged (only when they changed).
STATISTICS_INTERVAL_SECONDS = 60.0

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

    def on_message(self, frames: Frames) -> None:
        peer = frames[0].bytes
        if len(frames) < 2:
            answer: Answer | None = bad_request(0, "empty message: no request header frame")
        else:
            key = _key_of(frames[1]) if self._secured else None
            answer = self.service.handle(peer, frames[1].bytes, [_storable(frame) for frame in frames[2:]], key)
        if answer is not None:
            self._answer(peer, answer)
        self._run_disk_work()

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
        for reply in self.service.write_finished(object_id, generation, error):
            self._answer(reply.peer, reply.answer)
        self._run_disk_work()

    def on_read(self, object_id: bytes, generation: int, frames: Sequence[PayloadBuffer] | None, problem: str) -> None:
        for reply in self.service.read_finished(object_id, generation, frames, problem):
            self._answer(reply.peer, reply.answer)
        self._run_disk_work()

    def _run_disk_work(self) -> None:
        work = self.service.take_work()
        if work and self.disk is not None:
            self.disk.run(work)

    def _answer(self, peer: bytes, answer: Answer) -> None:
        status = answer.reply.status
        if status is StorageStatus.FULL:
            if not self._is_full:
                logger.warning("refusing puts: %s", answer.reply.reason)
            self._is_full = True
        elif self._is_full and status is StorageStatus.OK and answer.reply.value is None:
            self._is_full = False
        if answer.is_rejection and (peer, answer.reply.reason) not in self._logged:
            if len(self._logged) >= MAX_LOGGED_REJECTIONS:
                self._logged.clear()
            self._logged.add((peer, answer.reply.reason))
            role = self.service.role_of(peer) or "peer"
            verb = "refused a request from" if status is StorageStatus.REFUSED else "bad request from"
            logger.warning("%s %s %s: %s", verb, role, peer.hex(), answer.reply.reason)
        assert self.socket is not None
        try:
            self.socket.send([peer, encode_storage_reply(answer.reply), *answer.payload], copy=False)
        except zmq.ZMQError as error:
            logger.warning("could not answer peer %s: %s", peer.hex(), error)

    async def log_statistics_until(self, stop: asyncio.Event) -> None:
        last = None
        while True:
            try:
                await asyncio.wait_for(stop.wait(), STATISTICS_INTERVAL_SECONDS)
                return
            except asyncio.TimeoutError:
                pass
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


async def serve(
    config: ObjectStorageServerConfig,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
    sockets: Sockets | None = None,
) -> None:
    """Serve until `stop` is set (forever without one). `ready(endpoint)` is called once bound.

    Raises ObjectStorageBindError when the address cannot be bound, SpillDirectoryError when the spill directory
    cannot be used.
    """
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    sockets = sockets if sockets is not None else SocketFactory()
    roles = sockets.security.peer_roles() if sockets.security is not None else None
    lock: int | None = None
    shell: _ServerShell | None = None
    try:
        store, directory, lock = _open_store(config)
        shell = _ServerShell(StorageService(store, roles=roles), secured=roles is not None)
        if directory is not None:
            shell.disk = DiskWorker(directory, shell.on_written, shell.on_read)
        # The factory's ROUTER probes idle links: replies queued for a peer on a half-open connection pin frames.
        sock = _bind(sockets, config.bind_address)
        endpoint = bound_endpoint(sock)
        shell.socket = AsyncSocket(loop, sock, shell.on_message, copy=False)
        logger.info("%s: object storage server listening on %s", config.identity, endpoint)
        if ready is not None:
            ready(endpoint)
        await shell.log_statistics_until(stop)
        logger.info("%s: object storage server stopping", config.identity)
    finally:
        if shell is not None and shell.socket is not None:
            shell.socket.close()
        if shell is not None and shell.disk is not None:
            shell.disk.run(shell.service.store.abandon_reads())
            shell.disk.close()
        if lock is not None:
            os.close(lock)
        sockets.close()


def _setup_logging(config: ObjectStorageServerConfig) -> None:
    from scaler.config.logging_setup import setup_logging

    setup_logging(config, "object_storage_server")


async def _serve_until_signalled(config: ObjectStorageServerConfig, security: ServerKeys) -> None:
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
        await serve(config, ready=ready, stop=stop, sockets=SocketFactory(security=security.security))
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
    except KeyFileError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    if hasattr(signal, "SIGPIPE"):
        # Python ignores SIGPIPE at startup; restate it so that nothing embedding us can let a peer that
        # vanishes mid-write kill the server (behaviour F6).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        run(_serve_until_signalled(config, resolved))
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
