"""The synchronous object storage client, used lock-step from plain threads (client, processors).

Also holds what both client connections share: turning a payload into zero-copy frames, turning
reply frames into an object, and turning a reply status into the exception a caller sees.
"""

from __future__ import annotations

import itertools
import logging
import math
import pickle
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import zmq

from scaler.errors import IncompatiblePeerError, MissingObjects, ObjectStorageException, ObjectStorageFullError
from scaler.io.sockets import SocketFactory, Sockets, TransportSecurity
from scaler.protocol.codec import DecodeError, decode_storage_reply, encode_storage_request
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Delete,
    DeleteOwner,
    Exists,
    Get,
    Info,
    ObjectSize,
    Put,
    StorageHello,
    StorageInfo,
    StorageOperation,
    StorageReply,
    StorageRequest,
    StorageStatus,
    split_chunks,
)

logger = logging.getLogger(__name__)

#: One contiguous buffer: bytes, bytearray, memoryview, a pickle protocol 5 out-of-band buffer, ...
BufferLike = bytes | bytearray | memoryview | pickle.PickleBuffer
#: An object's bytes, whole or as several buffers that are concatenated in order.
Payload = bytes | bytearray | memoryview | Sequence[BufferLike]
#: What a get returns: a view of the single received frame, or the frames joined once.
ObjectBytes = memoryview | bytes | bytearray

_Value = TypeVar("_Value")

DEFAULT_TIMEOUT_SECONDS = 60.0
#: How long a request waits for a connection to the server to exist before it fails.
CONNECT_TIMEOUT_SECONDS = 10.0


# ---------------------------------------------------------------- shared by both connections


def open_dealer(sockets: Sockets, address: str, immediate: bool = False) -> zmq.Socket[Any]:
    """A DEALER connected to the server (the factory's options: unbounded queues, no linger, TCP keep-alive).
    `immediate`: messages are queued only to a completed connection (a send finds out the server is gone)."""
    try:
        return sockets.dealer(address, immediate=immediate)
    except zmq.ZMQError as error:
        raise ObjectStorageException(f"cannot connect to object storage at {address}: {error}") from None


def hello_operation(role: str, owner_id: bytes = b"") -> StorageHello:
    return StorageHello(PROTOCOL_VERSION, local_python_version(), role, owner_id)


def encode_request(request_id: int, operation: StorageOperation) -> bytes:
    return encode_storage_request(StorageRequest(request_id, operation))


def _byte_view(buffer: Any) -> memoryview:
    """A flat byte view of a buffer, without copying unless the buffer is not contiguous."""
    try:
        return pickle.PickleBuffer(buffer).raw()
    except BufferError:
        return memoryview(memoryview(buffer).tobytes(order="A"))


def payload_frames(payload: Payload) -> list[memoryview]:
    """The payload as frames of at most CHUNK_BYTES, as views of the caller's buffers (no copy)."""
    buffers: Sequence[Any] = payload if isinstance(payload, (list, tuple)) else (payload,)
    frames: list[memoryview] = []
    for buffer in buffers:
        frames.extend(chunk for chunk in split_chunks(_byte_view(buffer)) if len(chunk))
    return frames


def put_operation(object_id: bytes, frames: Sequence[memoryview], owner_id: bytes, name: str) -> Put:
    return Put(ObjectID(bytes(object_id)), bytes(owner_id), sum(len(frame) for frame in frames), name)


def object_from_frames(frames: Sequence[Any], total_bytes: int, address: str) -> ObjectBytes:
    """One frame: a view of it (no copy). Several: joined once into a bytearray."""
    sizes = [len(frame) for frame in frames]
    if sum(sizes) != total_bytes:
        raise ObjectStorageException(
            f"object storage at {address} announced {total_bytes} bytes but sent {sum(sizes)} in {len(frames)} frame(s)"
        )
    if not frames:
        return b""
    if len(frames) == 1:
        frame = frames[0]
        return frame.buffer if isinstance(frame, zmq.Frame) else memoryview(frame)
    joined = bytearray(total_bytes)
    view = memoryview(joined)
    offset = 0
    for frame, size in zip(frames, sizes, strict=True):
        view[offset : offset + size] = frame.buffer if isinstance(frame, zmq.Frame) else frame
        offset += size
    view.release()
    return joined


def raise_for_status(reply: StorageReply, address: str, operation: StorageOperation) -> None:
    """Turn a reply that is not ok into the exception the caller sees."""
    status = reply.status
    if status is StorageStatus.OK:
        return
    if status is StorageStatus.NOT_FOUND and isinstance(operation, Get):
        text = f"object {operation.object_id.hex()} is not in object storage at {address}"
        if reply.reason and not reply.reason.endswith(" is not stored"):  # more than "not stored": say it
            text += f": {reply.reason}"
        raise MissingObjects(text)
    if status is StorageStatus.REFUSED:
        raise IncompatiblePeerError(f"object storage at {address} refused the connection: {reply.reason}")
    if status is StorageStatus.FULL:
        raise ObjectStorageFullError(f"object storage at {address} refused the {type(operation).__name__.lower()}: "
                                     f"{reply.reason}")  # fmt: skip
    raise ObjectStorageException(
        f"object storage at {address} answered {status.value} to a {type(operation).__name__.lower()} request"
        + (f": {reply.reason}" if reply.reason else "")
    )


def reply_value(reply: StorageReply, kind: type[_Value], address: str) -> _Value:
    """The reply's value, checked to be of the kind the request expects (exact type: bool is not int)."""
    value = reply.value
    if type(value) is not kind:
        raise ObjectStorageException(
            f"object storage at {address} answered with {type(value).__name__}, expected {kind.__name__}"
        )
    return value


def timeout_error(address: str, timeout_seconds: float) -> ObjectStorageException:
    return ObjectStorageException(f"object storage at {address} did not answer within {timeout_seconds:g} s")


# ---------------------------------------------------------------- the synchronous connection


class ObjectStorageConnection:
    """Lock-step requests over one DEALER socket. Safe to share between threads (one request at a time).

    After a timeout the socket is replaced, so that a late reply cannot be taken for the answer to a
    later request; replies are also matched by request id and stale ones are discarded.
    """

    def __init__(
        self,
        address: str,
        role: str,
        sockets: SocketFactory | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        security: TransportSecurity | None = None,
        owner_id: bytes = b"",
    ) -> None:
        """`owner_id`: a client's id; the server lets a client store, read and delete only its own objects."""
        self._address = address
        self._role = role
        self._owner_id = owner_id
        self._is_factory_owned = sockets is None
        #: `security` secures the connection's own factory; a factory passed in brings its own
        self._sockets = sockets if sockets is not None else SocketFactory(security=security)
        self._timeout_seconds = timeout_seconds
        self._lock = threading.Lock()
        self._request_ids = itertools.count(1)
        self._socket: zmq.Socket[Any] | None = None
        self._is_greeted = False  #: the current socket's hello was accepted
        self._is_closed = False

    @property
    def address(self) -> str:
        return self._address

    def __enter__(self) -> ObjectStorageConnection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def put(self, object_id: bytes, payload: Payload, owner_id: bytes = b"", name: str = "") -> None:
        """Store an object (replacing one with the same id). Buffers are sent without being copied."""
        frames = payload_frames(payload)
        self._call(put_operation(object_id, frames, owner_id, name), frames)

    def get(self, object_id: bytes) -> ObjectBytes:
        """The object's bytes; raises MissingObjects when it is not stored."""
        reply, frames = self._call(Get(ObjectID(bytes(object_id))))
        return object_from_frames(frames, reply_value(reply, ObjectSize, self._address).total_bytes, self._address)

    def get_frames(self, object_id: bytes) -> list[memoryview]:
        """The object's bytes as the frames they travelled in (views, no copy); raises MissingObjects."""
        reply, frames = self._call(Get(ObjectID(bytes(object_id))))
        total = reply_value(reply, ObjectSize, self._address).total_bytes
        views = [frame.buffer if isinstance(frame, zmq.Frame) else memoryview(frame) for frame in frames]
        if sum(len(view) for view in views) != total:
            raise ObjectStorageException(f"object storage at {self._address} sent a truncated object")
        return views

    def delete(self, object_ids: Iterable[bytes]) -> int:
        """Delete objects (missing ones are ignored); returns how many were removed."""
        ids = tuple(ObjectID(bytes(object_id)) for object_id in object_ids)
        if not ids:
            return 0
        reply, _ = self._call(Delete(ids))
        return reply_value(reply, int, self._address)

    def exists(self, object_id: bytes) -> bool:
        reply, _ = self._call(Exists(ObjectID(bytes(object_id))))
        return reply_value(reply, bool, self._address)

    def info(self) -> StorageInfo:
        reply, _ = self._call(Info())
        return reply_value(reply, StorageInfo, self._address)

    def delete_owner(self, owner_id: bytes) -> int:
        """Delete every object put with this owner id; returns how many were removed."""
        reply, _ = self._call(DeleteOwner(bytes(owner_id)))
        return reply_value(reply, int, self._address)

    def close(self) -> None:
        with self._lock:
            if self._is_closed:
                return
            self._is_closed = True
            self._drop_socket()
            if self._is_factory_owned:
                self._sockets.close()

    # ------------------------------------------------------------ internals (called under the lock)

    def _call(self, operation: StorageOperation, payload: Sequence[memoryview] = ()) -> tuple[StorageReply, list[Any]]:
        with self._lock:
            if self._is_closed:
                raise ObjectStorageException(f"the connection to object storage at {self._address} is closed")
            if not self._is_greeted:
                self._say_hello()
            reply, frames = self._exchange(operation, payload)
            if reply.status is StorageStatus.HELLO_REQUIRED:  # the server restarted: greet it and retry once
                logger.info("object storage at %s asks for a hello again; greeting it and retrying", self._address)
                self._is_greeted = False
                self._say_hello()
                reply, frames = self._exchange(operation, payload)
        raise_for_status(reply, self._address, operation)
        return reply, frames

    def _say_hello(self) -> None:
        hello = hello_operation(self._role, self._owner_id)
        reply, _ = self._exchange(hello, ())
        raise_for_status(reply, self._address, hello)
        self._is_greeted = True

    def _exchange(self, operation: StorageOperation, payload: Sequence[memoryview]) -> tuple[StorageReply, list[Any]]:
        sock = self._current_socket()
        request_id = next(self._request_ids)
        self._send(sock, [encode_request(request_id, operation), *payload])
        deadline = time.monotonic() + self._timeout_seconds
        while True:
            remaining_ms = math.ceil((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0 or not sock.poll(remaining_ms, zmq.POLLIN):
                self._drop_socket()
                raise timeout_error(self._address, self._timeout_seconds)
            frames = sock.recv_multipart(copy=False)
            try:
                reply = decode_storage_reply(frames[0].bytes)
            except DecodeError as error:
                self._drop_socket()
                raise ObjectStorageException(f"object storage at {self._address} sent a bad reply: {error}") from None
            if reply.request_id == request_id:
                return reply, frames[1:]
            logger.debug("discarding a stale reply to request %d from %s", reply.request_id, self._address)

    def _send(self, sock: zmq.Socket[Any], frames: list[Any]) -> None:
        """The socket queues only to a live connection (IMMEDIATE): a server that is down is reported after the
        connect timeout, instead of the request waiting the full reply timeout in a queue. A connection lost between
        the poll and the send (a server restarting) refuses the send with EAGAIN: poll again until the timeout."""
        connect_seconds = min(self._timeout_seconds, CONNECT_TIMEOUT_SECONDS)
        deadline = time.monotonic() + connect_seconds
        while True:
            remaining_ms = max(0, math.ceil((deadline - time.monotonic()) * 1000))
            if not sock.poll(remaining_ms, zmq.POLLOUT):
                self._drop_socket()
                raise ObjectStorageException(
                    f"object storage at {self._address} is not reachable: no connection within {connect_seconds:g} s "
                    f"(is the object storage server running?)"
                )
            try:
                sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
                return
            except zmq.Again:
                continue  # the connection went between the poll and the send
            except zmq.ZMQError as error:
                self._drop_socket()
                raise ObjectStorageException(f"could not send to object storage at {self._address}: {error}") from None

    def _current_socket(self) -> zmq.Socket[Any]:
        if self._socket is None:
            self._socket = open_dealer(self._sockets, self._address, immediate=True)
        return self._socket

    def _drop_socket(self) -> None:
        """Forget the socket (after a timeout or on close); the next request opens and greets a new one."""
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        self._is_greeted = False
