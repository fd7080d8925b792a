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
from scaler.io.peer_roles import storage_refusal
from scaler.io.port_owner import address_in_use_problem
from scaler.io.sockets import PeerRoles, SocketFactory, Sockets, TransportSecurity, bound_endpoint
from scaler.io.zmq_async import AsyncSocket, Frames
from scaler.object_storage.store import NO_OWNER, ObjectStore, PayloadBuffer
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

REVOKED_TEXT = "this connection's CURVE key was revoked (removed from the authorised keys)"

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
    """The reply to one request, plus the payload frames that follow its header (the object a get asks for)."""

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


@dataclass(frozen=True, slots=True)
class _Greeted:
    """A peer that said hello: the role it gave, a client's owner id, and (with CURVE) the key it came with."""

    role: str
    owner: bytes
    key: bytes | None


#: Roles that store and read any client's objects: the worker side runs every client's tasks.
WORKER_ROLES = frozenset({"worker", "processor", "offload-proxy"})


class StorageService:
    """Request handling over an `ObjectStore`: hello bookkeeping, validation, who may do what, then the operation.

    Isolation, secured or not: a client (role "client", owner id in its hello) stores objects under its own id
    only, and reads, deletes and clears only its own objects; nobody but the scheduler replaces another owner's
    object or clears another owner's objects; the worker side reads every object (it runs every client's tasks)
    and stores results for their clients. With CURVE (`key` given to `handle`), an owner id belongs to the first
    key that claims it, and `roles` (the authorised folder's view) decides which roles a key may take; a key
    that is revoked is refused on its next request.
    """

    def __init__(
        self,
        store: ObjectStore | None = None,
        max_greeted_peers: int = MAX_GREETED_PEERS,
        roles: PeerRoles | None = None,
    ) -> None:
        self.store = store if store is not None else ObjectStore()
        #: peer identity -> what it said in its hello; least recently active first.
        self._greeted: OrderedDict[bytes, _Greeted] = OrderedDict()
        self._max_greeted_peers = max_greeted_peers
        self._roles = roles
        #: with CURVE: a client's owner id -> the key that first claimed it (until its objects are cleared)
        self._owner_keys: dict[bytes, bytes] = {}
        self.refusals = 0  #: requests refused for lack of rights (forged ids, foreign objects, revoked keys)

    def role_of(self, peer: bytes) -> str | None:
        greeted = self._greeted.get(peer)
        return greeted.role if greeted is not None else None

    def handle(self, peer: bytes, header: bytes, payload: Sequence[PayloadBuffer], key: bytes | None = None) -> Answer:
        try:
            request = decode_storage_request(header)
        except DecodeError as error:
            # Cap'n Proto appends a native stack trace on further lines; the first line says what is wrong.
            return _bad_request(0, f"undecodable request header: {str(error).splitlines()[0]}")
        operation, request_id = request.operation, request.request_id
        if isinstance(operation, StorageHello):
            return self._hello(peer, request_id, operation, payload, key)
        greeted = self._greeted.get(peer)
        if greeted is None:
            return Answer(StorageReply(request_id, StorageStatus.HELLO_REQUIRED, "say hello before any request"))
        if self._roles is not None:
            if key != greeted.key:
                return self._refused(request_id, "this identity said hello with another CURVE key")
            if not self._roles.roles_of(key or b""):
                self._greeted.pop(peer, None)
                return self._refused(request_id, f"authentication: {REVOKED_TEXT}")
        self._greeted.move_to_end(peer)
        if isinstance(operation, Put):
            return self._put(request_id, operation, payload, greeted)
        if payload:
            name = _OPERATION_NAMES[type(operation)]
            return _bad_request(request_id, f"{name} requests carry no payload, got {len(payload)} extra frame(s)")
        return self._execute(request_id, operation, greeted)

    def _hello(
        self, peer: bytes, request_id: int, hello: StorageHello, payload: Sequence[PayloadBuffer], key: bytes | None
    ) -> Answer:
        if payload:
            return _bad_request(request_id, f"hello requests carry no payload, got {len(payload)} extra frame(s)")
        # Storage moves opaque bytes, so only the protocol version must match: passing our own Python
        # version makes `incompatibility` check the protocol alone, with the same wording as everywhere.
        reason = incompatibility(hello.protocol_version, hello.python_version, None, hello.role or "peer")
        if reason is None:
            reason = self._hello_refusal(hello, key)
        if reason is not None:
            self._greeted.pop(peer, None)
            return Answer(StorageReply(request_id, StorageStatus.REFUSED, reason))
        if hello.role == "client" and key is not None:
            self._owner_keys.setdefault(hello.owner_id, key)
        self._greeted[peer] = _Greeted(hello.role, hello.owner_id, key)
        self._greeted.move_to_end(peer)
        while len(self._greeted) > self._max_greeted_peers:
            self._greeted.popitem(last=False)
        return _ok(request_id)

    def _hello_refusal(self, hello: StorageHello, key: bytes | None) -> str | None:
        if hello.role == "client" and not hello.owner_id:
            return "a client's hello must carry its client id (the owner of the objects it stores)"
        if self._roles is None:
            return None
        if key is None:
            return "refused: this connection is not authenticated"
        refusal = storage_refusal(self._roles.roles_of(key), hello.role)
        if refusal is not None:
            return refusal
        owner_key = self._owner_keys.get(hello.owner_id) if hello.role == "client" else None
        if owner_key is not None and owner_key != key:
            return "refused: this client id belongs to another CURVE key"
        return None

    def _put(self, request_id: int, put: Put, payload: Sequence[PayloadBuffer], peer: _Greeted) -> Answer:
        if not put.object_id:
            return _bad_request(request_id, "put with an empty object id")
        received = sum(len(frame) for frame in payload)
        if received != put.total_bytes:
            return _bad_request(
                request_id,
                f"put of object {put.object_id.hex()}: header says {put.total_bytes} bytes, "
                f"the {len(payload)} payload frame(s) add up to {received}",
            )
        if peer.role == "client" and put.owner_id != peer.owner:
            return self._refused(request_id, f"put of object {put.object_id.hex()}: a client stores under its own id")
        if peer.role not in ("client", "scheduler") and peer.role not in WORKER_ROLES:
            return self._refused(request_id, f"a {peer.role or 'peer'} does not store objects")
        existing = self.store.get(put.object_id)
        if existing is not None and existing.owner_id != put.owner_id and peer.role != "scheduler":
            return self._refused(request_id, f"object {put.object_id.hex()} belongs to another owner")
        self.store.put(put.object_id, put.owner_id, payload, put.name)
        return _ok(request_id)

    def _execute(self, request_id: int, operation: StorageOperation, peer: _Greeted) -> Answer:
        store = self.store
        if isinstance(operation, Get):
            stored = store.get(operation.object_id)
            if stored is None or not self._may_read(peer, stored.owner_id):
                # a foreign object is "not stored" to a client: its id must not be confirmed either
                return Answer(StorageReply(request_id, StorageStatus.NOT_FOUND, _not_found(operation.object_id)))
            return _ok(request_id, ObjectSize(stored.total_bytes), stored.frames)
        if isinstance(operation, Exists):
            stored = store.get(operation.object_id)
            return _ok(request_id, stored is not None and self._may_read(peer, stored.owner_id))
        if isinstance(operation, Delete):
            if peer.role in WORKER_ROLES or peer.role == "readiness-probe":
                return self._refused(request_id, f"a {peer.role} does not delete objects")
            if peer.role == "client":
                mine = [i for i in operation.object_ids if (o := store.get(i)) is None or o.owner_id == peer.owner]
                self.refusals += len(operation.object_ids) - len(mine)
                return _ok(request_id, store.delete(mine))
            return _ok(request_id, store.delete(operation.object_ids))
        if isinstance(operation, DeleteOwner):
            if peer.role != "scheduler" and not (peer.role == "client" and operation.owner_id == peer.owner):
                return self._refused(request_id, "only the scheduler clears another owner's objects")
            if self._owner_keys.get(operation.owner_id) is not None and peer.role == "scheduler":
                del self._owner_keys[operation.owner_id]  # the client left: its id may be claimed again
            return _ok(request_id, store.delete_owner(operation.owner_id))
        if isinstance(operation, Info):
            return _ok(request_id, store.info())
        raise AssertionError(f"unhandled storage operation {operation!r}")  # hello and put are handled earlier

    @staticmethod
    def _may_read(peer: _Greeted, owner: bytes) -> bool:
        if peer.role == "client":
            return owner in (peer.owner, NO_OWNER)
        return peer.role == "scheduler" or peer.role in WORKER_ROLES

    def _refused(self, request_id: int, reason: str) -> Answer:
        self.refusals += 1
        return Answer(StorageReply(request_id, StorageStatus.REFUSED, reason))


def _not_found(object_id: ObjectID) -> str:
    return f"object {object_id.hex()} is not stored"


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
    """Glues the ROUTER socket to the StorageService."""

    def __init__(self, service: StorageService, secured: bool = False) -> None:
        self.service = service
        self.socket: AsyncSocket | None = None
        self._secured = secured
        self._logged: set[tuple[bytes, str]] = set()  #: (peer, reason) of rejections logged: each once

    def on_message(self, frames: Frames) -> None:
        peer = frames[0].bytes
        if len(frames) < 2:
            answer = _bad_request(0, "empty message: no request header frame")
        else:
            key = _key_of(frames[1]) if self._secured else None
            answer = self.service.handle(peer, frames[1].bytes, [_storable(frame) for frame in frames[2:]], key)
        if answer.is_rejection and (peer, answer.reply.reason) not in self._logged:
            if len(self._logged) >= MAX_LOGGED_REJECTIONS:
                self._logged.clear()
            self._logged.add((peer, answer.reply.reason))
            role = self.service.role_of(peer) or "peer"
            verb = "refused a request from" if answer.reply.status is StorageStatus.REFUSED else "bad request from"
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
    sockets: Sockets | None = None,
) -> None:
    """Serve until `stop` is set (forever without one). `ready(endpoint)` is called once bound.

    Raises ObjectStorageBindError when the address cannot be bound.
    """
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else asyncio.Event()
    sockets = sockets if sockets is not None else SocketFactory()
    roles = sockets.security.peer_roles() if sockets.security is not None else None
    shell = _ServerShell(StorageService(roles=roles), secured=roles is not None)
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
