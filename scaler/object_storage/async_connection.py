"""The asyncio shell of the object storage client (its protocol: `client_core.py`), used by asyncio shells (the
scheduler): requests pipelined on one DEALER socket and matched to their callers by request id, so any number of
coroutines can wait on the server at once. Every method takes an optional `timeout_seconds` (default: the
connection's) and raises ObjectStorageException when the server does not answer in time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

import zmq

from scaler.io.sockets import SocketFactory, Sockets, TransportSecurity
from scaler.io.zmq_async import AsyncSocket, watch_events
from scaler.io.zmq_parts import Frames
from scaler.object_storage.client_core import (
    DEFAULT_TIMEOUT_SECONDS,
    Answered,
    Failed,
    Greeted,
    Notice,
    ObjectBytes,
    Outcome,
    Payload,
    Reconnect,
    Refused,
    StorageClientCore,
    frames_as_put,
    hello_operation,
    object_from_frames,
    on_the_wire,
    payload_frames,
    put_operation,
    reply_value,
    timeout_error,
)
from scaler.object_storage.connection import open_dealer
from scaler.protocol.codec import DecodeError, decode_storage_reply, encode_storage_request
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    Delete,
    DeleteOwner,
    Exists,
    Fates,
    Get,
    Info,
    ObjectFates,
    ObjectSize,
    StorageInfo,
    StorageOperation,
)

logger = logging.getLogger(__name__)


class AsyncObjectStorageConnection:
    """Pipelined requests over one DEALER socket on the running event loop (see the module's docstring)."""

    def __init__(
        self,
        address: str,
        role: str,
        sockets: Sockets | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        security: TransportSecurity | None = None,
    ) -> None:
        self._address = address
        self._is_factory_owned = sockets is None
        #: `security` secures the connection's own factory; a factory passed in brings its own
        self._sockets: Sockets = sockets if sockets is not None else SocketFactory(security=security)
        self._core: StorageClientCore[None] = StorageClientCore(
            address, hello_operation(role, local_python_version()), timeout_seconds
        )
        self._socket: AsyncSocket | None = None
        self._monitor: AsyncSocket | None = None  #: the socket's connection events
        #: ticket -> the future of its outcome; removed by the coroutine that waits on it
        self._waiting: dict[int, asyncio.Future[Answered]] = {}
        self._greeted = asyncio.Event()  #: set when the hello is answered, either way
        self._timer: asyncio.TimerHandle | None = None
        self._is_closed = False

    @property
    def address(self) -> str:
        return self._address

    async def connect(self, timeout_seconds: float | None = None) -> None:
        """Open the connection and wait until the server accepted the hello (optional: requests open it too)."""
        self._core.greet()
        self._flush()
        timeout = self._core.timeout_seconds if timeout_seconds is None else timeout_seconds
        try:
            await asyncio.wait_for(self._greeted.wait(), timeout)
        except asyncio.TimeoutError:
            raise timeout_error(self._address, timeout) from None
        self._core.greet()  # raises IncompatiblePeerError when the hello was refused

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
        answer = await self._call(Get(ObjectID(bytes(object_id))), (), timeout_seconds)
        total = reply_value(answer.reply, ObjectSize, self._address).total_bytes
        return object_from_frames(frames_as_put(answer.reply, answer.frames, self._address), total, self._address)

    async def delete(self, object_ids: Iterable[bytes], timeout_seconds: float | None = None) -> int:
        """Delete objects (missing ones are ignored); returns how many were removed."""
        ids = tuple(ObjectID(bytes(object_id)) for object_id in object_ids)
        if not ids:
            return 0
        return reply_value((await self._call(Delete(ids), (), timeout_seconds)).reply, int, self._address)

    async def exists(self, object_id: bytes, timeout_seconds: float | None = None) -> bool:
        answer = await self._call(Exists(ObjectID(bytes(object_id))), (), timeout_seconds)
        return reply_value(answer.reply, bool, self._address)

    async def fates(self, object_ids: tuple[ObjectID, ...], timeout_seconds: float | None = None) -> tuple[int, ...]:
        """What became of these objects (the scheduler's ask, held_results.py H6): per object, -1 nothing to wait for,
        else how many times it was lost with the host cache that held it."""
        answer = await self._call(Fates(object_ids), (), timeout_seconds)
        return reply_value(answer.reply, ObjectFates, self._address).losses

    async def info(self, timeout_seconds: float | None = None) -> StorageInfo:
        return reply_value((await self._call(Info(), (), timeout_seconds)).reply, StorageInfo, self._address)

    async def delete_owner(self, owner_id: bytes, timeout_seconds: float | None = None) -> int:
        """Delete every object put with this owner id; returns how many were removed."""
        answer = await self._call(DeleteOwner(bytes(owner_id)), (), timeout_seconds)
        return reply_value(answer.reply, int, self._address)

    def close(self) -> None:
        """Close the socket; pending requests fail with ObjectStorageException."""
        if self._is_closed:
            return
        self._is_closed = True
        self._carry_out(self._core.on_closed())
        self._drop_socket()
        if self._timer is not None:
            self._timer.cancel()
        if self._is_factory_owned:
            self._sockets.close()

    # ------------------------------------------------------------ internals

    async def _call(
        self, operation: StorageOperation, payload: Sequence[memoryview], timeout: float | None
    ) -> Answered:
        loop = asyncio.get_running_loop()
        ticket = self._core.request(operation, payload, now=loop.time(), timeout_seconds=timeout)
        future: asyncio.Future[Answered] = loop.create_future()
        self._waiting[ticket] = future
        try:
            self._flush()
            self._arm_timer()
            return await future
        finally:
            self._waiting.pop(ticket, None)

    def _flush(self) -> None:
        """Send what the core queued (a DEALER without IMMEDIATE queues while no connection is up: no EAGAIN)."""
        outgoing = self._core.take_outgoing()
        if not outgoing:
            return
        if self._socket is None:
            loop = asyncio.get_running_loop()
            sock = open_dealer(self._sockets, self._address)
            self._socket = AsyncSocket(loop, sock, self._on_message, copy=False)
            # a dropped connection (the server stopped or crashed): the unanswered requests go again (rule 9)
            monitor = self._sockets.event_monitor(sock, zmq.EVENT_DISCONNECTED)
            self._monitor = watch_events(loop, monitor, self._on_event)
        secured = self._sockets.security is not None
        for request, payload in outgoing:
            request, payload = on_the_wire(request, payload, secured)
            try:
                self._socket.send([encode_storage_request(request), *payload], copy=False)
            except zmq.ZMQError as error:
                self._carry_out(self._core.on_send_failed(str(error)))
                return

    def _on_message(self, frames: Frames) -> None:
        try:
            reply = decode_storage_reply(frames[0].bytes)
        except DecodeError as error:
            logger.warning("a bad reply from object storage at %s: %s", self._address, error)
            self._carry_out(self._core.on_bad_reply(str(error)))
            return
        now = asyncio.get_running_loop().time()
        self._carry_out(self._core.on_reply(reply, [frame.buffer for frame in frames[1:]], now=now))
        self._flush()  # a hello and a request sent again (a restarted server)

    def _on_event(self, event: int, _value: int) -> None:
        if event == zmq.EVENT_DISCONNECTED:
            if self._socket is not None:
                self._socket.drain()  # the answers that came before the connection dropped settle their requests
            self._carry_out(self._core.on_disconnected())
            self._flush()

    def _arm_timer(self) -> None:
        deadline = self._core.next_deadline()
        if deadline is None or (self._timer is not None and self._timer.when() <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._carry_out(self._core.on_tick(asyncio.get_running_loop().time()))
        self._arm_timer()

    def _carry_out(self, outcomes: list[Outcome[None]]) -> None:
        for outcome in outcomes:
            if isinstance(outcome, Answered | Failed):
                future = self._waiting.get(outcome.ticket)
                if future is not None and not future.done():
                    if isinstance(outcome, Answered):
                        future.set_result(outcome)
                    else:
                        future.set_exception(outcome.error)
            elif isinstance(outcome, Greeted):
                self._greeted.set()
            elif isinstance(outcome, Refused):
                logger.error("%s", outcome.error)
                self._greeted.set()
            elif isinstance(outcome, Reconnect):
                self._greeted.clear()
                self._drop_socket()
            elif isinstance(outcome, Notice):
                logger.info("%s", outcome.text)

    def _drop_socket(self) -> None:
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
