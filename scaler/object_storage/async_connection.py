"""The asyncio object storage client, used by asyncio shells (scheduler, worker agent).

Requests are pipelined on one DEALER socket and matched to their callers by request id, so any number
of coroutines can wait on the server at once. The hello is sent when the socket opens, and requests
follow it without waiting (the server handles a connection's messages in order); if the hello is
refused, every pending request fails with IncompatiblePeerError and so does every later one.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import zmq

from scaler.errors import IncompatiblePeerError, ObjectStorageException
from scaler.io.sockets import SocketFactory, Sockets, TransportSecurity
from scaler.io.zmq_async import AsyncSocket, Frames
from scaler.object_storage.connection import (
    DEFAULT_TIMEOUT_SECONDS,
    ObjectBytes,
    Payload,
    encode_request,
    hello_operation,
    object_from_frames,
    open_dealer,
    payload_frames,
    put_operation,
    raise_for_status,
    reply_value,
    timeout_error,
)
from scaler.protocol.codec import DecodeError, decode_storage_reply
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    Delete,
    DeleteOwner,
    Exists,
    Get,
    Info,
    ObjectSize,
    StorageInfo,
    StorageOperation,
    StorageReply,
    StorageStatus,
)

logger = logging.getLogger(__name__)

_Answer = tuple[StorageReply, list[Any]]  #: a reply and the payload frames that followed it


class AsyncObjectStorageConnection:
    """Pipelined requests over one DEALER socket on the running event loop.

    Every method takes an optional `timeout_seconds` (default: the connection's) and raises
    ObjectStorageException when the server does not answer in time.
    """

    def __init__(
        self,
        address: str,
        role: str,
        sockets: Sockets | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        security: TransportSecurity | None = None,
    ) -> None:
        self._address = address
        self._role = role
        self._is_factory_owned = sockets is None
        #: `security` secures the connection's own factory; a factory passed in brings its own
        self._sockets: Sockets = sockets if sockets is not None else SocketFactory(security=security)
        self._timeout_seconds = timeout_seconds
        self._request_ids = itertools.count(1)
        self._socket: AsyncSocket | None = None
        #: request id -> future of its answer; entries are removed by the coroutine that waits on them.
        self._pending: dict[int, asyncio.Future[_Answer]] = {}
        self._hello_id = 0  #: request id of the latest hello; replies to older hellos are ignored
        self._hello_answered = asyncio.Event()
        self._refusal: str | None = None  #: why the server refused our hello; final once set
        self._is_closed = False

    @property
    def address(self) -> str:
        return self._address

    async def connect(self, timeout_seconds: float | None = None) -> None:
        """Open the connection and wait until the server accepted the hello (optional: requests open it too)."""
        self._open()
        try:
            await asyncio.wait_for(self._hello_answered.wait(), self._timeout(timeout_seconds))
        except asyncio.TimeoutError:
            raise timeout_error(self._address, self._timeout(timeout_seconds)) from None
        if self._refusal is not None:
            raise IncompatiblePeerError(self._refusal)

    async def put(
        self,
        object_id: bytes,
        payload: Payload,
        owner_id: bytes = b"",
        name: str = "",
        timeout_seconds: float | None = None,
    ) -> None:
        """Store an object (replacing one with the same id). Buffers are sent without being copied."""
        frames = payload_frames(payload)
        await self._call(put_operation(object_id, frames, owner_id, name), frames, timeout_seconds)

    async def get(self, object_id: bytes, timeout_seconds: float | None = None) -> ObjectBytes:
        """The object's bytes; raises MissingObjects when it is not stored."""
        reply, frames = await self._call(Get(ObjectID(bytes(object_id))), (), timeout_seconds)
        return object_from_frames(frames, reply_value(reply, ObjectSize, self._address).total_bytes, self._address)

    async def delete(self, object_ids: Iterable[bytes], timeout_seconds: float | None = None) -> int:
        """Delete objects (missing ones are ignored); returns how many were removed."""
        ids = tuple(ObjectID(bytes(object_id)) for object_id in object_ids)
        if not ids:
            return 0
        reply, _ = await self._call(Delete(ids), (), timeout_seconds)
        return reply_value(reply, int, self._address)

    async def exists(self, object_id: bytes, timeout_seconds: float | None = None) -> bool:
        reply, _ = await self._call(Exists(ObjectID(bytes(object_id))), (), timeout_seconds)
        return reply_value(reply, bool, self._address)

    async def info(self, timeout_seconds: float | None = None) -> StorageInfo:
        reply, _ = await self._call(Info(), (), timeout_seconds)
        return reply_value(reply, StorageInfo, self._address)

    async def delete_owner(self, owner_id: bytes, timeout_seconds: float | None = None) -> int:
        """Delete every object put with this owner id; returns how many were removed."""
        reply, _ = await self._call(DeleteOwner(bytes(owner_id)), (), timeout_seconds)
        return reply_value(reply, int, self._address)

    def close(self) -> None:
        """Close the socket; pending requests fail with ObjectStorageException."""
        if self._is_closed:
            return
        self._is_closed = True
        message = f"the connection to object storage at {self._address} was closed"
        self._fail_pending(lambda: ObjectStorageException(message))
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._is_factory_owned:
            self._sockets.close()

    # ------------------------------------------------------------ internals

    def _timeout(self, timeout_seconds: float | None) -> float:
        return self._timeout_seconds if timeout_seconds is None else timeout_seconds

    def _open(self) -> AsyncSocket:
        if self._is_closed:
            raise ObjectStorageException(f"the connection to object storage at {self._address} is closed")
        if self._refusal is not None:
            raise IncompatiblePeerError(self._refusal)
        if self._socket is None:
            sock = open_dealer(self._sockets, self._address)
            self._socket = AsyncSocket(asyncio.get_running_loop(), sock, self._on_message, copy=False)
            self._send_hello()
        return self._socket

    def _send_hello(self) -> None:
        assert self._socket is not None
        self._hello_id = next(self._request_ids)
        self._hello_answered.clear()
        self._socket.send([encode_request(self._hello_id, hello_operation(self._role))])

    async def _call(
        self, operation: StorageOperation, payload: Sequence[memoryview], timeout_seconds: float | None
    ) -> _Answer:
        timeout = self._timeout(timeout_seconds)
        deadline = asyncio.get_running_loop().time() + timeout
        reply, frames, hello_id = await self._exchange(operation, payload, deadline, timeout)
        if reply.status is StorageStatus.HELLO_REQUIRED:
            # The server restarted. Greet it again unless a hello was already sent after this request
            # (other pipelined requests see the same answer), then retry once.
            if self._hello_id == hello_id:
                logger.info("object storage at %s asks for a hello again; greeting it and retrying", self._address)
                self._send_hello()
            reply, frames, _ = await self._exchange(operation, payload, deadline, timeout)
        raise_for_status(reply, self._address, operation)
        return reply, frames

    async def _exchange(
        self, operation: StorageOperation, payload: Sequence[memoryview], deadline: float, timeout: float
    ) -> tuple[StorageReply, list[Any], int]:
        sock = self._open()
        hello_id = self._hello_id
        request_id = next(self._request_ids)
        future: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            try:
                sock.send([encode_request(request_id, operation), *payload], copy=False)
            except zmq.ZMQError as error:
                raise ObjectStorageException(f"could not send to object storage at {self._address}: {error}") from None
            remaining = max(0.0, deadline - asyncio.get_running_loop().time())
            reply, frames = await asyncio.wait_for(future, remaining)
        except asyncio.TimeoutError:
            raise timeout_error(self._address, timeout) from None
        finally:
            self._pending.pop(request_id, None)
        return reply, frames, hello_id

    def _on_message(self, frames: Frames) -> None:
        try:
            reply = decode_storage_reply(frames[0].bytes)
        except DecodeError as error:
            logger.warning("ignoring a bad reply from object storage at %s: %s", self._address, error)
            return
        if reply.request_id == self._hello_id:
            self._on_hello_reply(reply)
            return
        future = self._pending.get(reply.request_id)
        if future is None or future.done():
            logger.debug("discarding a stale reply to request %d from %s", reply.request_id, self._address)
            return
        future.set_result((reply, frames[1:]))

    def _on_hello_reply(self, reply: StorageReply) -> None:
        if reply.status is not StorageStatus.OK:
            reason = reply.reason or reply.status.value
            self._refusal = f"object storage at {self._address} refused the connection: {reason}"
            logger.error("%s", self._refusal)
            refusal = self._refusal
            self._fail_pending(lambda: IncompatiblePeerError(refusal))
        self._hello_answered.set()

    def _fail_pending(self, new_error: Callable[[], Exception]) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(new_error())
