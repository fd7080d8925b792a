"""Puts pipelined on a blocking link of the object storage client (`client_core.py`, `connection.BlockingLink`): many
puts in flight on one connection, sent back to back by a thread of this module's, and each item (a client's task)
held until every put issued before it is acknowledged, then handed on in the order held (the core's put gate).

Storing an argument over the inline limit used to be one lock-step round trip inside `submit` (about 2.8 ms for
100 KB here), so a loop of such submits went at the storage's round-trip rate; here `put` only queues it. A put that
fails fails the items held behind it with the storage's error (`fail`), and names its object (`forget`), so that
the next use stores it again.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

import zmq

from scaler.errors import ObjectStorageException
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.object_storage.client_core import (
    Outcome,
    PutFailed,
    Released,
    StorageClientCore,
    hello_operation,
    payload_frames,
)
from scaler.object_storage.connection import BlockingLink
from scaler.object_storage.local_segments import LocalSegments
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ObjectID

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Bytes of puts sent and not yet acknowledged; `put` waits beyond this (the payloads are held until acknowledged).
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024


def _let_other_threads_run() -> None:
    """Release the GIL for a moment. A caller that submits in a loop holds the GIL but for the interpreter's forced
    switches (every 5 ms), and the put thread needs it for each step between its system calls: without this turn per
    put it wrote few files while the loop ran, and U3's tasks started only once it ended (wall median 0.70 s against
    0.58 s with it, alternated; the client's CPU +0.02 s a round)."""
    time.sleep(0)


class _Put(NamedTuple):
    """A put queued by `put` for the thread (`local`: the file is written there, by the thread)."""

    object_id: ObjectID
    payload: Any
    frames: list[memoryview]
    size: int
    name: str
    local: LocalSegments | None  #: where the thread writes it (None: the put goes over the socket)
    adopt_file: str = ""  #: the segment file the thread wrote, to adopt (empty: the put goes over the socket)


class _Hold(NamedTuple):
    """Items queued by `submit` for the thread, held behind the puts queued before them."""

    items: list[Any]


class PutPipeline(Generic[T]):
    """`put` queues a put, `submit` holds items behind the puts issued before them; released items go to `release`
    (in order, under this pipeline's lock), failed ones to `fail`, the objects of failed puts to `forget`.

    The caller's thread does no system call and takes no lock the thread holds while it works: `put` and `submit` only
    append to a queue the thread takes whole (a pipe wakes it, once per taking), and the thread writes the segment files
    of the puts it took, issues them and holds the items behind them, in the order queued. Each system call of the
    caller's thread (an open, a write, a lock it waits for) let the client's other threads take the GIL, and U3's
    submit loop waited about 200 us for it back each time, against 9 us for the same open in a quiet loop."""

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
        self._owner_id = owner_id
        self._release, self._fail, self._forget = release, fail, forget
        self._sockets = SocketFactory(security=security)
        core: StorageClientCore[T] = StorageClientCore(
            address, hello_operation("client", local_python_version(), owner_id), timeout_seconds
        )
        #: queues to a connection not made yet: puts wait for a server that is starting (up to their timeout)
        self._link = BlockingLink(core, self._sockets, immediate=False)
        #: the core, and the order of releases; re-entrant: a released or failed future's done-callback may submit
        #: again from inside `release` or `fail`
        self._lock = threading.RLock()
        self._room = threading.Condition(self._lock)  #: signalled as in-flight bytes go down and the gate empties
        #: what callers queued for the thread, in order, and the bytes of its puts; guarded by `_queue_lock`, which is
        #: held for an append or a taking only (never while anything else is done)
        self._queue: list[_Put | _Hold] = []
        self._queued_bytes = 0
        self._queue_lock = threading.Lock()
        self._applying = False  #: the thread took the queue and has not issued all of it yet
        self._drained = False  #: the thread stopped and failed what was queued: nothing queued from now on is taken
        self._closed = False  #: no more puts: closed, or the thread stopped
        self._finished = False  #: close() ran
        #: a pipe wakes the thread from its poll when something is queued (it also polls the storage socket)
        self._wake_read, self._wake_write = os.pipe()
        self._woken = False  #: a wake-up is in the pipe and the thread has not taken the queue since (one is enough)
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._thread = threading.Thread(target=self._run, name="scaler-client-puts", daemon=True)
        self._thread.start()

    @property
    def is_closed(self) -> bool:
        return self._closed

    def put(self, object_id: ObjectID, payload: Any, name: str, local: LocalSegments | None = None) -> None:
        """Queue a put (the payload's buffers are kept until it is written or acknowledged). `local`: the server's
        segment directory, seen from this host: the thread writes the object there and queues its adoption (a refused
        adopt's file is removed by the server)."""
        frames = payload_frames(payload)
        size = sum(len(frame) for frame in frames)
        core = self._link.core
        if self._closed:
            raise ObjectStorageException(f"the connection to object storage at {core.address} is closed")
        unusable = core.unusable()  # read without the lock: it only ever goes from None to an error
        if unusable is not None:  # as the core itself would refuse it: the caller's submit raises, no task is made
            raise unusable
        if self._over_room(size):
            with self._lock:
                while self._over_room(size) and not self._closed:
                    self._room.wait(1.0)
        if not self._enqueue(_Put(object_id, payload, frames, size, name, local), size):
            raise ObjectStorageException(f"the connection to object storage at {core.address} is closed")
        if self._applying:  # the thread is writing and issuing what it took: it needs the GIL, give it a turn
            _let_other_threads_run()

    def submit(self, items: list[T]) -> None:
        """Hold items behind the puts queued before them: released at once when there is none (an idle pipeline),
        else by the thread once they are stored."""
        with self._queue_lock:
            direct = not self._queue and not self._applying
        if direct:
            with self._lock:
                released = self._link.core.hold(items)
                if released:
                    self._release(released)
        elif not self._enqueue(_Hold(items), 0):
            self._fail(items, ObjectStorageException(
                f"the connection to object storage at {self._link.core.address} is closed"
            ))  # fmt: skip

    def flush(self, timeout_seconds: float) -> None:
        """Wait until nothing is queued, no put is pending and no item is held (or the pipeline stopped); before
        anything that bypasses the gate (a graph, a cancel) so that it cannot overtake the items held here."""
        deadline = time.monotonic() + timeout_seconds
        with self._lock:
            while not self._is_idle() and not self._closed and time.monotonic() < deadline:
                self._room.wait(min(1.0, max(0.0, deadline - time.monotonic())))

    def close(self, timeout_seconds: float = 5.0) -> None:
        """Let what is pending finish (up to `timeout_seconds`), then stop the thread; what is still held fails."""
        self.flush(timeout_seconds)
        with self._lock:
            if self._finished:
                return
            self._finished = self._closed = True
            self._room.notify_all()
        with self._queue_lock:
            self._wake()
        self._thread.join(5.0)
        os.close(self._wake_read)
        os.close(self._wake_write)
        self._sockets.close()

    def _over_room(self, size: int) -> bool:
        """Whether a put of `size` would take the bytes queued and in flight beyond MAX_IN_FLIGHT_BYTES (a put alone
        always goes)."""
        in_flight = self._link.core.gated_bytes + self._queued_bytes
        return in_flight > 0 and in_flight + size > MAX_IN_FLIGHT_BYTES

    def _is_idle(self) -> bool:
        return not self._queue and not self._applying and self._link.core.is_idle

    def _enqueue(self, queued: _Put | _Hold, size: int) -> bool:
        """Queue for the thread and wake it (False: the thread stopped, nothing is queued)."""
        with self._queue_lock:
            if self._drained:
                return False
            self._queue.append(queued)
            self._queued_bytes += size
            self._wake()
        return True

    def _wake(self) -> None:
        """Under the queue's lock, before close() closes the pipe."""
        if self._woken or self._drained:  # the thread takes what is queued now when it comes to it
            return
        self._woken = True
        try:
            os.write(self._wake_write, b"x")
        except BlockingIOError:  # the pipe is full: the thread has wake-ups to read already
            pass

    # ------------------------------------------------------------ the puts thread

    def _run(self) -> None:
        link = self._link
        poller: zmq.Poller = zmq.Poller()
        polled: zmq.Socket[Any] | None = None
        monitor: zmq.Socket[Any] | None = None
        poller.register(self._wake_read, zmq.POLLIN)
        try:
            while not self._closed:
                taken = self._take()
                with self._lock:
                    if taken:
                        self._issue(taken)
                    self._carry_out(link.flush())
                    deadline = link.core.next_deadline()
                    if taken:
                        with self._queue_lock:
                            self._applying = False
                        self._room.notify_all()
                if link.socket is not polled:  # the first, or a new one after the core said Reconnect
                    if polled is not None:
                        poller.unregister(polled)
                        poller.unregister(monitor)
                    polled, monitor = link.socket, link.monitor
                    poller.register(polled, zmq.POLLIN)
                    poller.register(monitor, zmq.POLLIN)  # a dropped connection: the unanswered puts go again
                timeout_ms = -1 if deadline is None else max(1, math.ceil((deadline - time.monotonic()) * 1000))
                events = dict(poller.poll(timeout_ms))
                if self._wake_read in events:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_read, 4096)
                if polled in events or monitor in events or (deadline is not None and time.monotonic() >= deadline):
                    with self._lock:
                        if polled in events:
                            self._carry_out(link.receive())
                        if monitor in events:  # after the answers that came before the connection dropped
                            self._carry_out(link.events())
                        if deadline is not None and time.monotonic() >= deadline:
                            self._carry_out(link.carry_out(link.core.on_tick(time.monotonic())))
                        self._room.notify_all()  # acknowledged puts make room, and may leave the gate idle (flush)
        except Exception as error:  # the thread cannot go on: everything waiting on it fails with why
            logger.warning("pipelined puts to object storage at %s stopped: %r", link.core.address, error)
            with self._lock:
                self._carry_out(link.carry_out(link.core.on_send_failed(repr(error))))
        finally:
            with self._lock:
                self._closed = True
                self._carry_out(link.carry_out(link.core.on_closed()))
                self._fail_queued()
                self._room.notify_all()
            link.drop()

    def _take(self) -> list[_Put | _Hold]:
        """What callers queued since the last taking, in order; its puts' segment files written (no lock held)."""
        with self._queue_lock:
            self._woken = False
            taken, self._queue = self._queue, []
            self._applying = bool(taken)
        for index, queued in enumerate(taken):
            if isinstance(queued, _Put) and queued.local is not None:
                buffers = list(queued.payload) if isinstance(queued.payload, (list, tuple)) else [queued.payload]
                try:
                    adopt_file = queued.local.write(queued.object_id, self._owner_id, queued.name, buffers)
                except Exception as error:  # not written here after all: the socket takes it
                    logger.warning("could not write object %s for adoption: %r", queued.object_id.hex(), error)
                    adopt_file = None
                taken[index] = _Put(queued.object_id, queued.payload, queued.frames, queued.size, queued.name,
                                    queued.local, adopt_file or "")  # fmt: skip
        return taken

    def _issue(self, taken: list[_Put | _Hold]) -> None:
        """Under the lock: the puts taken issued and the items held behind them, in the order queued."""
        core, now = self._link.core, time.monotonic()
        released: list[T] = []  #: items with no put pending before them: released together, after the batch is issued
        for position, queued in enumerate(taken):
            if isinstance(queued, _Hold):
                released += core.hold(queued.items)
                continue
            try:
                if queued.adopt_file:
                    core.put_gated(queued.object_id, queued.frames, self._owner_id, queued.name, now=now,
                                   adopt_file=queued.adopt_file)  # fmt: skip
                else:
                    core.put_gated(queued.object_id, queued.frames, self._owner_id, queued.name, now=now)
            except Exception as error:  # the core took no more puts since `put` asked it: this and what follows fail
                self._fail_taken(taken[position:], error)
                break
            with self._queue_lock:
                self._queued_bytes -= queued.size
        if released:
            self._release(released)

    def _fail_queued(self) -> None:
        """Under the lock, once the thread stopped: what is still queued fails (puts forgotten, held items failed)."""
        with self._queue_lock:
            self._drained = True
            taken, self._queue, self._queued_bytes = self._queue, [], 0
        self._fail_taken(taken, ObjectStorageException(
            f"the connection to object storage at {self._link.core.address} is closed"
        ))  # fmt: skip

    def _fail_taken(self, taken: list[_Put | _Hold], error: BaseException) -> None:
        """Under the lock: puts that will not be issued are forgotten (their files removed), and the items held
        behind them fail with `error`."""
        for queued in taken:
            if isinstance(queued, _Hold):
                self._fail(queued.items, error)
                continue
            self._forget(queued.object_id)
            if queued.adopt_file and queued.local is not None:
                queued.local.discard(queued.adopt_file)
            with self._queue_lock:
                self._queued_bytes = max(0, self._queued_bytes - queued.size)

    def _carry_out(self, outcomes: list[Outcome[T]]) -> None:
        """Under the lock: releases in order (those that follow each other as one: one send to the scheduler for the
        tasks many answers released), failures with their error."""
        released: list[T] = []
        for outcome in outcomes:
            if isinstance(outcome, Released):
                released += outcome.items
            elif isinstance(outcome, PutFailed):
                if released:
                    self._release(released)
                    released = []
                self._forget(outcome.object_id)
                if outcome.doomed:
                    self._fail(outcome.doomed, outcome.error)
        if released:
            self._release(released)
