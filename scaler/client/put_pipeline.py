"""Arguments stored pipelined: many puts in flight on one object storage connection, and each task held until
every put issued before it is acknowledged, then handed on in submission order.

Storing an argument over the inline limit used to be one lock-step round trip inside `submit` (about 2.8 ms for
100 KB here), so a loop of such submits went at the storage's round-trip rate. Here `submit` only queues the put;
a thread of this module sends the queued puts back to back on a connection of its own and reads the replies. The
rule that keeps this correct: a task never leaves before its objects are stored, because `PutGate` releases a
task only once every put issued before the task was encoded has been acknowledged (a conservative watermark: it
may wait for an earlier put it does not use, never the other way round), and releases tasks in the order they
were submitted. A put that fails fails the tasks held behind it with the storage's error, and its object is
forgotten by the encoder so that the next use stores it again.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import zmq

from scaler.errors import ObjectStorageException
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.object_storage.connection import (
    encode_request,
    hello_operation,
    open_dealer,
    payload_frames,
    put_operation,
    raise_for_status,
    timeout_error,
)
from scaler.protocol.codec import DecodeError, decode_storage_reply
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import StorageOperation, StorageStatus

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Bytes of puts sent and not yet acknowledged; `put` waits beyond this (the payloads are held until acknowledged).
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024


class PutGate(Generic[T]):
    """Pure: which held items may leave, given which puts were issued and acknowledged. Not thread-safe."""

    def __init__(self) -> None:
        self._sequence = itertools.count(1)
        self._last_issued = 0
        self._unacknowledged: set[int] = set()
        self._held: collections.deque[tuple[int, T]] = collections.deque()

    @property
    def is_idle(self) -> bool:
        return not self._unacknowledged and not self._held

    def issued(self) -> int:
        """A put was issued; returns its sequence number."""
        self._last_issued = next(self._sequence)
        self._unacknowledged.add(self._last_issued)
        return self._last_issued

    def submit(self, items: list[T]) -> list[T]:
        """Items encoded now (after every put issued so far): those that may leave at once, in order."""
        if self.is_idle:
            return items
        self._held.extend((self._last_issued, item) for item in items)
        return self._releasable()

    def acknowledged(self, sequence: int) -> list[T]:
        self._unacknowledged.discard(sequence)
        return self._releasable()

    def failed(self, sequence: int) -> tuple[list[T], list[T]]:
        """Put `sequence` failed: (the held items that may have needed it, the items that may now leave)."""
        self._unacknowledged.discard(sequence)
        doomed = [item for watermark, item in self._held if watermark >= sequence]
        self._held = collections.deque((watermark, item) for watermark, item in self._held if watermark < sequence)
        return doomed, self._releasable()

    def _releasable(self) -> list[T]:
        lowest_pending = min(self._unacknowledged, default=math.inf)
        released = []
        while self._held and self._held[0][0] < lowest_pending:
            released.append(self._held.popleft()[1])
        return released


@dataclass
class _Put:
    sequence: int
    object_id: ObjectID
    frames: list[memoryview]
    owner_id: bytes
    name: str
    sent_at: float = 0.0

    @property
    def size(self) -> int:
        return sum(len(frame) for frame in self.frames)


class PutPipeline(Generic[T]):
    """The shell around PutGate: `put` queues a put, `submit` holds items behind the puts issued before them;
    released items go to `release` (in order, under this pipeline's lock), failed ones to `fail`."""

    def __init__(
        self,
        address: str,
        owner_id: bytes,
        security: TransportSecurity | None,
        timeout_seconds: float,
        release: Callable[[list[T]], None],
        fail: Callable[[list[T], BaseException], None],
        forget: Callable[[ObjectID], None],
    ) -> None:
        self._address = address
        self._owner_id = owner_id
        self._timeout_seconds = timeout_seconds
        self._release, self._fail, self._forget = release, fail, forget
        self._gate: PutGate[T] = PutGate()
        #: the gate, the queues and the order of releases; re-entrant: a released or failed future's done-callback
        #: may submit again from inside `release` or `fail`
        self._lock = threading.RLock()
        self._room = threading.Condition(self._lock)  #: signalled as in-flight bytes go down
        self._queued: collections.deque[_Put] = collections.deque()
        self._in_flight: dict[int, _Put] = {}
        self._in_flight_bytes = 0
        self._closed = False  #: no more puts: closed, or stopped by a failure
        self._finished = False  #: close() ran
        self._sockets = SocketFactory(security=security)
        #: a pipe wakes the thread from its poll when a put is queued (it also polls the storage socket)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._thread = threading.Thread(target=self._run, name="scaler-client-puts", daemon=True)
        self._thread.start()

    def put(self, object_id: ObjectID, payload: Any, name: str) -> None:
        """Queue a put (the payload's buffers are sent without a copy and kept until acknowledged)."""
        frames = payload_frames(payload)
        with self._lock:
            if self._closed:
                raise ObjectStorageException(f"the connection to object storage at {self._address} is closed")
            size = sum(len(frame) for frame in frames)
            while self._in_flight_bytes and self._in_flight_bytes + size > MAX_IN_FLIGHT_BYTES and not self._closed:
                self._room.wait(1.0)
            self._queued.append(_Put(self._gate.issued(), object_id, frames, self._owner_id, name))
            self._in_flight_bytes += size
            self._wake()

    def submit(self, items: list[T]) -> None:
        with self._lock:
            released = self._gate.submit(items)
            if released:
                self._release(released)

    @property
    def is_closed(self) -> bool:
        return self._closed

    def flush(self, timeout_seconds: float) -> None:
        """Wait until no put is pending and no item is held (or the pipeline stopped); before anything that
        bypasses the gate (a graph, a cancel) so that it cannot overtake the tasks held here."""
        deadline = time.monotonic() + timeout_seconds
        with self._lock:
            while not self._gate.is_idle and not self._closed and time.monotonic() < deadline:
                self._room.wait(min(1.0, max(0.0, deadline - time.monotonic())))

    def close(self, timeout_seconds: float = 5.0) -> None:
        """Let what is pending finish (up to `timeout_seconds`), then stop the thread."""
        self.flush(timeout_seconds)
        with self._lock:
            if self._finished:
                return
            self._finished = self._closed = True
            self._room.notify_all()
            self._wake()
        self._thread.join(5.0)
        os.close(self._wake_read)
        os.close(self._wake_write)
        self._sockets.close()

    def _wake(self) -> None:
        try:
            os.write(self._wake_write, b"x")
        except BlockingIOError:  # the pipe is full: the thread has wake-ups to read already
            pass

    # ------------------------------------------------------------ the puts thread

    def _run(self) -> None:
        storage: zmq.Socket[Any] = open_dealer(self._sockets, self._address)
        poller = zmq.Poller()
        poller.register(self._wake_read, zmq.POLLIN)
        poller.register(storage, zmq.POLLIN)
        greeted = False
        try:
            while not self._closed:
                with self._lock:
                    sending = list(self._queued)
                    self._queued.clear()
                if sending and not greeted:
                    self._send(storage, 0, hello_operation("client", self._owner_id), [])
                    greeted = True
                for put in sending:
                    self._in_flight[put.sequence] = put
                    put.sent_at = time.monotonic()
                    self._send(
                        storage,
                        put.sequence,
                        put_operation(put.object_id, put.frames, put.owner_id, put.name),
                        put.frames,
                    )
                events = dict(poller.poll(self._poll_ms()))
                if self._wake_read in events:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_read, 4096)
                if storage in events:
                    greeted = self._receive(storage, greeted)
                self._check_timeout()
        except Exception as error:  # the connection is unusable: everything waiting on it fails
            logger.warning("pipelined puts to object storage at %s stopped: %r", self._address, error)
            self._fail_all(error if isinstance(error, ObjectStorageException) else ObjectStorageException(str(error)))
        finally:
            storage.close(linger=0)

    def _poll_ms(self) -> int:
        if not self._in_flight:
            return -1
        oldest = min(put.sent_at for put in self._in_flight.values())
        return max(1, math.ceil((oldest + self._timeout_seconds - time.monotonic()) * 1000))

    @staticmethod
    def _send(storage: zmq.Socket[Any], request_id: int, operation: StorageOperation, frames: list[memoryview]) -> None:
        storage.send_multipart([encode_request(request_id, operation), *frames], copy=False)

    def _receive(self, storage: zmq.Socket[Any], greeted: bool) -> bool:
        while storage.poll(0, zmq.POLLIN):
            frames = storage.recv_multipart(copy=False)
            try:
                reply = decode_storage_reply(frames[0].bytes)
            except DecodeError as error:
                raise ObjectStorageException(f"object storage at {self._address} sent a bad reply: {error}") from None
            if reply.request_id == 0:  # the hello
                raise_for_status(reply, self._address, hello_operation("client", self._owner_id))
                continue
            put = self._in_flight.pop(reply.request_id, None)
            if put is None:
                continue
            if reply.status is StorageStatus.HELLO_REQUIRED:  # the server restarted: greet it and send again
                self._send(storage, 0, hello_operation("client", self._owner_id), [])
                self._in_flight[put.sequence] = put
                self._send(
                    storage, put.sequence, put_operation(put.object_id, put.frames, put.owner_id, put.name), put.frames
                )
                continue
            self._settle(put, reply)
        return greeted

    def _settle(self, put: _Put, reply: Any) -> None:
        try:
            raise_for_status(reply, self._address, put_operation(put.object_id, put.frames, put.owner_id, put.name))
            error = None
        except Exception as failure:
            error = failure
        with self._lock:
            self._in_flight_bytes -= put.size
            self._room.notify_all()
            doomed: list[T] = []
            if error is None:
                released = self._gate.acknowledged(put.sequence)
            else:
                self._forget(put.object_id)
                doomed, released = self._gate.failed(put.sequence)
            if doomed:
                self._fail(doomed, error or ObjectStorageException("put failed"))
            if released:
                self._release(released)

    def _check_timeout(self) -> None:
        now = time.monotonic()
        if any(now - put.sent_at > self._timeout_seconds for put in self._in_flight.values()):
            raise timeout_error(self._address, self._timeout_seconds)

    def _fail_all(self, error: ObjectStorageException) -> None:
        with self._lock:
            puts = [*self._in_flight.values(), *self._queued]
            self._in_flight.clear()
            self._queued.clear()
            self._in_flight_bytes = 0
            self._closed = True
            self._room.notify_all()
            doomed: list[T] = []
            for put in sorted(puts, key=lambda p: p.sequence):
                self._forget(put.object_id)
                failed, released = self._gate.failed(put.sequence)
                doomed += failed
                if released:
                    self._release(released)
            if doomed:
                self._fail(doomed, error)
