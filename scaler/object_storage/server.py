"""The object storage server: a ROUTER socket in front of an `ObjectStore`.

`StorageService` is the pure part: one request (peer, header, payload frames) in, one answer out; it
checks hellos and validates requests. `serve` is the asyncio shell around it: it receives with
copy=False, so payload frames are kept as the zmq.Frame objects they arrived in and a get sends those
same frames back (zmq shares them by reference count; no byte is copied on the server).

A peer that vanishes mid-transfer disturbs nobody: ZeroMQ delivers a multipart message whole or not
at all, and a ROUTER (not in mandatory mode) drops replies addressed to a peer that is gone.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from scaler.config.sections import ObjectStorageServerConfig
from scaler.io.address import AddressError, parse_address
from scaler.io.curve import KeyFileError, security_of
from scaler.io.event_loop import run
from scaler.io.port_owner import address_in_use_problem
from scaler.io.sockets import SocketFactory, TransportSecurity, bound_endpoint
from scaler.io.zmq_async import AsyncSocket, Frames
from scaler.object_storage.store import ObjectStore, PayloadBuffer
from scaler.protocol.codec import DecodeError, decode_storage_request, encode_storage_reply
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.protocol.handshake import incompatibility
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    Delete,
    DeleteOwner,
    Exists,
    Get,
    Info,
    ObjectSize,
    Put,
    StorageHello,
    StorageOperation,
    StorageReply,
    StorageStatus,
)

logger = logging.getLogger(__name__)

#: How often the object count and bytes are logged (only when they changed).
STATISTICS_INTERVAL_SECONDS = 60.0

#: Idle seconds before TCP keep-alive probes start on a peer's link.

#: Peers remembered as having said hello. The least recently active are forgotten beyond this; such a
#: peer gets `helloRequired` on its next request and says hello again, as after a server restart.
MAX_GREETED_PEERS = 65536

#: Payload frames smaller than this are copied out of their zmq.Frame before being stored: libzmq may
#: receive small messages into a shared buffer, and keeping the frame would pin that whole buffer.
SMALL_FRAME_BYTES = 65536

_OPERATION_NAMES: dict[type, str] = {
    StorageHello: "hello",
    Put: "put",
    Get: "get",
    Delete: "delete",
    Exists: "exists",
    Info: "info",
    DeleteOwner: "deleteOwner",
}


# ---------------------------------------------------------------- pure request handling


@dataclass(frozen=True, slots=True)
class Answer:
    """The reply to one request, plus the payload frames that follow its header (a get's object)."""

    reply: StorageReply
    payload: tuple[PayloadBuffer, ...] = ()

    @property
    def is_rejection(self) -> bool:
        """A reply worth a WARNING on the server: the request was malformed or the peer incompatible."""
        return self.reply.status in (StorageStatus.BAD_REQUEST, StorageStatus.REFUSED)


def _bad_request(request_id: int, reason: str) -> Answer:
    return Answer(StorageReply(request_id, StorageStatus.BAD_REQUEST, reason))


def _ok(request_id: int, value: Any = None, payload: tuple[PayloadBuffer, ...] = ()) -> Answer:
    return Answer(StorageReply(request_id, StorageStatus.OK, "", value), payload)


class StorageService:
    """Request handling over an `ObjectStore`: hello bookkeeping, validation, then the operation."""

    def __init__(self, store: ObjectStore | None = None, max_greeted_peers: int = MAX_GREETED_PEERS) -> None:
        self.store = store if store is not None else ObjectStore()
        #: peer identity -> role it gave in its hello; least recently active first.
        self._greeted: OrderedDict[bytes, str] = OrderedDict()
        self._max_greeted_peers = max_greeted_peers

    def role_of(self, peer: bytes) -> str | None:
        return self._greeted.get(peer)

    def handle(self, peer: bytes, header: bytes, payload: Sequence[PayloadBuffer]) -> Answer:
        try:
            request = decode_storage_request(header)
        except DecodeError as error:
            # Cap'n Proto appends a native stack trace on further lines; the first line says what is wrong.
            return _bad_request(0, f"undecodable request header: {str(error).splitlines()[0]}")
        operation, request_id = request.operation, request.request_id
        if isinstance(operation, StorageHello):
            return self._hello(peer, request_id, operation, payload)
        if peer not in self._greeted:
            return Answer(StorageReply(request_id, StorageStatus.HELLO_REQUIRED, "say hello before any request"))
        self._greeted.move_to_end(peer)
        if isinstance(operation, Put):
            return self._put(request_id, operation, payload)
        if payload:
            name = _OPERATION_NAMES[type(operation)]
            return _bad_request(request_id, f"{name} requests carry no payload, got {len(payload)} extra frame(s)")
        return self._execute(request_id, operation)

    def _hello(self, peer: bytes, request_id: int, hello: StorageHello, payload: Sequence[PayloadBuffer]) -> Answer:
        if payload:
            return _bad_request(request_id, f"hello requests carry no payload, got {len(payload)} extra frame(s)")
        # Storage moves opaque bytes, so only the protocol version must match: passing our own Python
        # version makes `incompatibility` check the protocol alone, with the same wording as everywhere.
        reason = incompatibility(hello.protocol_version, hello.python_version, None, hello.role or "peer")
        if reason is not None:
            self._greeted.pop(peer, None)
            return Answer(StorageReply(request_id, StorageStatus.REFUSED, reason))
        self._greeted[peer] = hello.role
        self._greeted.move_to_end(peer)
        while len(self._greeted) > self._max_greeted_peers:
            self._greeted.popitem(last=False)
        return _ok(request_id)

    def _put(self, request_id: int, put: Put, payload: Sequence[PayloadBuffer]) -> Answer:
        if not put.object_id:
            return _bad_request(request_id, "put with an empty object id")
        received = sum(len(frame) for frame in payload)
        if received != put.total_bytes:
            return _bad_request(
                request_id,
                f"put of object {put.object_id.hex()}: header says {put.total_bytes} bytes, "
                f"the {len(payload)} payload frame(s) add up to {received}",
            )
        self.store.put(put.object_id, put.owner_id, payload, put.name)
        return _ok(request_id)

    def _execute(self, request_id: int, operation: StorageOperation) -> Answer:
        store = self.store
        if isinstance(operation, Get):
            stored = store.get(operation.object_id)
            if stored is None:
                return Answer(StorageReply(request_id, StorageStatus.NOT_FOUND, _not_found(operation.object_id)))
            return _ok(request_id, ObjectSize(stored.total_bytes), stored.frames)
        if isinstance(operation, Exists):
            return _ok(request_id, store.exists(operation.object_id))
        if isinstance(operation, Delete):
            return _ok(request_id, store.delete(operation.object_ids))
        if isinstance(operation, DeleteOwner):
            return _ok(request_id, store.delete_owner(operation.owner_id))
        if isinstance(operation, Info):
            return _ok(request_id, store.info())
        raise AssertionError(f"unhandled storage operation {operation!r}")  # hello and put are handled earlier


def _not_found(object_id: ObjectID) -> str:
    return f"object {object_id.hex()} is not stored"


# ---------------------------------------------------------------- asyncio shell


class ObjectStorageBindError(Exception):
    """The server could not listen on its address (in use, malformed, not permitted)."""


def _bind(sockets: SocketFactory, address: str) -> zmq.Socket[Any]:
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


def _storable(frame: Any) -> PayloadBuffer:
    """A received payload frame as it will be kept: the zmq.Frame itself, or a copy when small."""
    if isinstance(frame, zmq.Frame) and len(frame) < SMALL_FRAME_BYTES:
        return frame.bytes
    return frame  # type: ignore[no-any-return]


class _ServerShell:
    """Glues the ROUTER socket to the StorageService."""

    def __init__(self, service: StorageService) -> None:
        self.service = service
        self.socket: AsyncSocket | None = None

    def on_message(self, frames: Frames) -> None:
        peer = frames[0].bytes
        if len(frames) < 2:
            answer = _bad_request(0, "empty message: no request header frame")
        else:
            answer = self.service.handle(peer, frames[1].bytes, [_storable(frame) for frame in frames[2:]])
        if answer.is_rejection:
            role = self.service.role_of(peer) or "peer"
            verb = "refused a hello from" if answer.reply.status is StorageStatus.REFUSED else "bad request from"
            logger.warning("%s %s %s: %s", verb, role, peer.hex(), answer.reply.reason)
        assert self.socket is not None
        try:
            self.socket.send([peer, encode_storage_reply(answer.reply), *answer.payload], copy=False)
        except zmq.ZMQError as error:
            logger.warning("could not answer peer %s: %s", peer.hex(), error)

    async def log_statistics_until(self, stop: asyncio.Event) -> None:
        last = self.service.store.info()
        while True:
            try:
                await asyncio.wait_for(stop.wait(), STATISTICS_INTERVAL_SECONDS)
                return
            except asyncio.TimeoutError:
                pass
            info = self.service.store.info()
            if info != last:
                logger.info(
                    "storing %d object(s), %d bytes, for %d owner(s)",
                    info.object_count,
                    info.total_bytes,
                    info.owner_count,
                )
                last = info


async def serve(
    config: ObjectStorageServerConfig,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
    sockets: SocketFactory | None = None,
) -> None:
    """Serve until `stop` is set (forever without one). `ready(endpoint)` is called once bound.

    Raises ObjectStorageBindError when the address cannot be bound.
    """
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    shell = _ServerShell(StorageService())
    sockets = sockets if sockets is not None else SocketFactory()
    try:
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
        if shell.socket is not None:
            shell.socket.close()
        sockets.close()


def _setup_logging(config: ObjectStorageServerConfig) -> None:
    from scaler.config.logging_setup import setup_logging

    setup_logging(config, "object_storage_server")


def _announce(endpoint: str) -> None:
    logger.info("object storage server listening on %s", endpoint)


async def _serve_until_signalled(config: ObjectStorageServerConfig, security: TransportSecurity | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    try:
        await serve(config, ready=_announce, stop=stop, sockets=SocketFactory(security=security))
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)


def run_object_storage_server(config: ObjectStorageServerConfig, security: TransportSecurity | None = None) -> int:
    """Run the server in this process until SIGINT/SIGTERM; returns the exit code. `security`: how its socket
    is secured (None: the CURVE keys of its settings, if any)."""
    _setup_logging(config)
    try:
        security = security if security is not None else security_of(config)
    except KeyFileError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    if hasattr(signal, "SIGPIPE"):
        # Python ignores SIGPIPE at startup; restate it so that nothing embedding us can let a peer that
        # vanishes mid-write kill the server (behaviour F6).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        run(_serve_until_signalled(config, security))
    except ObjectStorageBindError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION  # the address is malformed, in use or not ours
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
