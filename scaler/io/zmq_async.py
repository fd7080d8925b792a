"""ZeroMQ sockets driven by an asyncio loop through their file descriptor.

`zmq.asyncio` pays a future per message; here a socket's descriptor is registered once with
`loop.add_reader`, and each wake-up drains every queued multipart message (in bursts, so one busy
socket cannot starve the loop). Sends never block: high-water marks are off, and a ROUTER created
with `mandatory=True` raises `PeerUnreachable` for an identity that is gone, which is how a shell
learns at once that a peer died.

ZeroMQ descriptors are edge-triggered: any socket operation may consume the readiness edge. So after
a send the socket's EVENTS are checked and a drain is scheduled if messages are waiting. A drain asks
for EVENTS before each read too, and stops when nothing waits: a read of an empty socket raises
zmq.Again, which costs more than the question (asking also resets the descriptor, as a read would).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

import zmq

from scaler.io.zmq_parts import EVENTS, POLLIN, Frames, joined, receive_parts, send_parts

logger = logging.getLogger(__name__)

#: Messages handled per wake-up before yielding to other callbacks.
BURST = 512


class PeerUnreachable(Exception):
    """A ROUTER socket has no connection for this identity any more."""

    def __init__(self, identity: bytes) -> None:
        super().__init__(identity)
        self.identity = identity


class AsyncSocket:
    """One ZeroMQ socket on an asyncio loop. `on_message(frames)` is called for every message;
    `on_burst_end()` after each burst of messages (a good moment to send what they caused).

    With `lock`, every ZeroMQ call on the socket is made under it, so that another thread may also
    send on the socket (ZeroMQ allows that when calls are serialised with a full memory barrier). With `reading`
    too, another thread may also read it (`read_waiting`, `scaler.io.waiting_reader`). With `pause_after_burst`, the
    socket is left unread for the seconds it returns after each burst (the scheduler's while it is idle: the
    heartbeats of a big cluster read a few at a time). With `collector_paused`, CPython's cyclic garbage collector
    does not run while a burst is read and handled: what a burst makes lives until its end (its decoded messages,
    the events, the effects and frames of what it sends: a submission of 20,000 tasks is one burst), and each young
    collection inside it would walk them all and pass them on to the older generations, whose collections walk them
    again (with 5,000 workers, 8-14 µs a task in collections). After the burst
    most of it is gone, freed by reference counting, and the next collection walks what stays."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: zmq.Socket[Any],
        on_message: Callable[[Frames], None] | None,
        copy: bool = True,
        on_burst_end: Callable[[], None] | None = None,
        lock: threading.Lock | None = None,
        reading: threading.RLock | None = None,
        pause_after_burst: Callable[[], float] | None = None,
        collector_paused: bool = False,
    ) -> None:
        self._loop = loop
        self._collector_paused = collector_paused
        self._socket = sock
        self._on_message = on_message
        self._copy = copy
        #: a ZeroMQ socket's messages are read part by part (`_receive`)
        self._by_parts = isinstance(sock, zmq.Socket)
        self._on_burst_end = on_burst_end
        self._lock: threading.Lock | contextlib.nullcontext[None] = lock or contextlib.nullcontext()
        #: held while messages are read and handled, when another thread may read too (`read_waiting`): each reader
        #: hands on what it read before the next one reads, so messages are handled in the order they came
        self._reading: threading.RLock | contextlib.nullcontext[None] = reading or contextlib.nullcontext()
        self._drain_scheduled = False
        self._burst_full = False  #: the last burst stopped at its limit (`behind`)
        self._closed = False
        #: after a burst of reads, how long the socket is left unread (0: not at all), so that what comes meanwhile is
        #: read in one wake-up: each wake-up of a process that slept costs far more than the message it reads
        self._pause_after_burst = pause_after_burst
        self._paused = False  #: left unread now (`_pause`): its descriptor is not watched
        #: called on the loop's thread after its drain handled messages (`waiting_reader`: a reading waiter wakes)
        self.after_loop_read: Callable[[], None] | None = None
        #: True while a drain hands messages to `on_message`, and while `on_burst_end` runs after them
        self.in_burst = False
        if on_message is not None:
            loop.add_reader(self._fd(), self._drain)
            self._schedule_drain()  # messages may already be queued; the edge may be gone

    def _fd(self) -> int:
        return int(self._socket.getsockopt(zmq.FD))

    @property
    def descriptor(self) -> int:
        """The socket's ZeroMQ descriptor (readable when ZeroMQ has news for the socket: edge-triggered)."""
        with self._lock:
            return self._fd()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def behind(self) -> bool:
        """Whether the last burst stopped at its limit (more messages may wait; the next read comes at once)."""
        return self._burst_full

    def send(self, frames: Sequence[Any], copy: bool = True, check_pending: bool = True) -> None:
        """Send one multipart message without blocking. Raises PeerUnreachable (mandatory ROUTER).
        `check_pending=False`: the caller sends more and calls `check_pending()` after the last (one question to
        ZeroMQ for several sends)."""
        if self._closed:
            return
        pending = False
        try:
            with self._lock:
                try:
                    send_parts(self._socket, frames, copy)
                except zmq.ZMQError as error:
                    if error.errno == errno.EHOSTUNREACH:
                        raise PeerUnreachable(bytes(frames[0])) from None
                    raise
                finally:
                    pending = check_pending and self._has_pending()
        finally:  # a failed send consumes the readiness edge too: never leave waiting messages unread
            if pending:
                self._schedule_drain()

    def check_pending(self) -> None:
        """After sends made with `check_pending=False`: a drain is scheduled if messages wait (a send may have
        consumed the descriptor's readiness edge)."""
        with self._lock:
            pending = self._has_pending()
        if pending:
            self._schedule_drain()

    def send_from_other_thread(self, frames: Sequence[Any]) -> None:
        """Send from a thread other than the loop's (needs `lock`); wakes the loop if messages wait."""
        pending = False
        try:
            with self._lock:
                if self._closed:
                    raise zmq.ZMQError(zmq.ENOTSOCK)
                try:
                    send_parts(self._socket, frames)
                finally:
                    pending = self._has_pending()
        finally:
            if pending:
                self._loop.call_soon_threadsafe(self._schedule_drain)

    def check_pending_from_other_thread(self) -> None:
        """From a thread other than the loop's (needs `lock`): the loop drains the messages that wait, if any (a read
        of another thread left them, after taking the descriptor's edge)."""
        with self._lock:
            pending = self._has_pending()
        if pending:
            try:
                self._loop.call_soon_threadsafe(self._schedule_drain)
            except RuntimeError:  # the loop is closed
                pass

    def _has_pending(self) -> bool:
        return (
            self._on_message is not None
            and not self._closed
            and bool(cast(int, self._socket.getsockopt(EVENTS)) & POLLIN)
        )

    def _schedule_drain(self) -> None:
        if not self._drain_scheduled and not self._closed:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain_soon)

    def drain(self) -> None:
        """Handle the messages waiting now (e.g. before acting on a connection event that came after them)."""
        self._drain()

    def _drain_soon(self) -> None:
        self._drain_scheduled = False
        self._drain()

    def _drain(self) -> None:
        if self._closed or self._on_message is None:
            return
        handled = 0
        self.in_burst = True
        #: paused here, and not by a burst this one runs inside (a drain from another socket's handler): resumed here
        pausing = self._collector_paused and gc.isenabled()
        if pausing:
            gc.disable()
        try:
            with self._reading:
                handled = self._read_and_handle(BURST)
            self._burst_full = handled == BURST
            if self._burst_full:
                self._schedule_drain()
        finally:
            try:  # still in the burst while its end is handled: what it sends is flushed there (Outbox)
                if handled and self._on_burst_end is not None and not self._closed:
                    self._on_burst_end()
            finally:
                self.in_burst = False
                if pausing:
                    gc.enable()
        if handled and self.after_loop_read is not None:
            self.after_loop_read()
        if handled and self._pause_after_burst is not None and not self._paused and not self._closed:
            seconds = self._pause_after_burst()
            if seconds > 0:
                self._pause(seconds)

    def _pause(self, seconds: float) -> None:
        """The descriptor is not watched for `seconds`; then what waits is read (a send meanwhile may read too)."""
        self._paused = True
        self._loop.remove_reader(self._fd())
        self._loop.call_later(seconds, self._resume)

    def _resume(self) -> None:
        self._paused = False
        if not self._closed:
            self._loop.add_reader(self._fd(), self._drain)
            self._schedule_drain()  # what came meanwhile: the descriptor's edge is gone

    def read_waiting(
        self, limit: int = BURST, guard: Callable[[], contextlib.AbstractContextManager[Any]] | None = None
    ) -> int:
        """On any thread (needs `lock` and `reading`): read and handle the messages waiting now, up to `limit`; how
        many were handled. The caller waits for more on `descriptor` and calls again. `guard()`: a context entered
        once messages wait, before the first is read, and left after the last is handled (`waiting_reader`: a
        KeyboardInterrupt held back meanwhile, so that it cannot land between a message's read and its handling)."""
        if self._closed or self._on_message is None:
            return 0
        with self._reading:
            if guard is None:
                return self._read_and_handle(limit)
            with self._lock:
                waiting = not self._closed and bool(cast(int, self._socket.getsockopt(EVENTS)) & POLLIN)
            if not waiting:
                return 0
            with guard():  # nobody else reads meanwhile (`reading` is held): the message still waits
                return self._read_and_handle(limit, first_waits=True)

    def _read_and_handle(self, limit: int, first_waits: bool = False) -> int:
        """Up to `limit` messages read and handed to `on_message`, one by one; stops when none waits.
        `first_waits`: the caller saw a message waiting, so the first read does not ask again."""
        sock, handle = self._socket, self._on_message
        assert handle is not None
        handled = 0
        while handled < limit:
            try:
                with self._lock:
                    # asked first: an empty socket's recv raises zmq.Again, which costs more than the question
                    if self._closed:
                        return handled
                    if first_waits:
                        first_waits = False
                    elif not cast(int, sock.getsockopt(EVENTS)) & POLLIN:
                        return handled
                    if self._by_parts:
                        frames = receive_parts(sock, self._copy)
                    else:  # a stand-in socket (scaler_rehearsal.testing.memory_network) reads whole messages
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=self._copy)
            except zmq.Again:
                return handled
            except zmq.ZMQError as error:
                if self._closed or error.errno in (zmq.ENOTSOCK, zmq.ETERM):
                    return handled
                raise
            handled += 1
            try:
                handle(frames)
            except Exception:
                logger.exception("error while handling a message; the message is dropped")
            if self._closed:
                return handled
        return handled

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_message is not None:
            try:
                self._loop.remove_reader(self._fd())
            except (zmq.ZMQError, ValueError, RuntimeError):
                pass
        with self._lock:
            self._socket.close(linger=0)


class Outbox:
    """Coalesces the frames sent to each peer during one loop iteration into one multipart message.

    Each frame is a complete encoded message; small ones leave joined into one part (`zmq_parts.joined`), which the
    receiver splits again (`codec.split`), and it treats the messages of a multipart message as a batch.
    `routed=True` prefixes each multipart message with the peer identity (ROUTER sockets).
    `on_unreachable(identity)` is called when a mandatory ROUTER cannot route to a peer.
    `flushed_at_burst_end=True`: its owner flushes it at the end of each burst of its socket (its `on_burst_end`
    calls `flush_unless_held`), so frames sent during one, or by `on_burst_end` itself before it flushes (the
    scheduler's core sees a burst's messages there), are not also given a flush of their own on the next loop
    iteration (which would cost an iteration, and a poll of every descriptor, per message a peer answers at once).
    `wait_seconds`: a frame sent with `may_wait=True` is held up to that long (or until `most_waiting` frames wait
    for its peer), so that the frames of several bursts leave in one message: a peer that has many answers coming
    (the scheduler's client with many tasks in flight) costs a send and a read each way per batch of them, not per
    burst. A frame that may not wait takes its peer's held ones along (a peer's frames keep their order).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: AsyncSocket,
        routed: bool,
        on_unreachable: Callable[[bytes], None] | None = None,
        flushed_at_burst_end: bool = False,
        wait_seconds: float = 0.0,
        most_waiting: int = 256,
    ) -> None:
        self._loop = loop
        self._socket = sock
        self._flushed_at_burst_end = flushed_at_burst_end
        self._routed = routed
        self._on_unreachable = on_unreachable
        self._wait_seconds = wait_seconds
        self._most_waiting = most_waiting
        #: a peer's frames are here (sent at the next flush) or in `_waiting` (held), never in both
        self._pending: dict[bytes, list[bytes]] = {}
        self._waiting: dict[bytes, list[bytes]] = {}
        self._flush_scheduled = False
        self._release_scheduled = False
        self.frames_sent = 0

    def send(self, peer: bytes, frame: bytes, may_wait: bool = False) -> None:
        frames = self._pending.get(peer)
        if frames is not None:
            frames.append(frame)
        elif may_wait and self._wait_seconds > 0:
            self._hold(peer, frame)
            return
        else:
            held = self._waiting.pop(peer, None)
            if held is None:
                self._pending[peer] = [frame]
            else:
                held.append(frame)
                self._pending[peer] = held
        self._schedule_flush()

    def _hold(self, peer: bytes, frame: bytes) -> None:
        held = self._waiting.get(peer)
        if held is None:
            self._waiting[peer] = [frame]
        else:
            held.append(frame)
            if len(held) >= self._most_waiting:
                self._pending[peer] = self._waiting.pop(peer)
                self._schedule_flush()
                return
        if not self._release_scheduled:
            self._release_scheduled = True
            self._loop.call_later(self._wait_seconds, self._release)

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            if not (self._flushed_at_burst_end and self._socket.in_burst):
                self._loop.call_soon(self.flush)

    def _release(self) -> None:
        """The held frames' time is up: they leave (with what else their peers have pending)."""
        self._release_scheduled = False
        if self._waiting:
            waiting, self._waiting = self._waiting, {}
            self._pending.update(waiting)  # no peer is in both
            self._flush_scheduled = True
            self.flush()

    @property
    def holding(self) -> int:
        """How many frames are held (`may_wait`) now."""
        return sum(len(held) for held in self._waiting.values())

    def flush_unless_held(self) -> None:
        """Send now what waits for the next loop iteration (not what is held on purpose)."""
        if self._flush_scheduled:
            self.flush()

    def flush(self, everything: bool = False) -> None:
        """Send what is pending; `everything`: what is held too (its owner stops)."""
        if everything and self._waiting:
            self._release()
            return
        if not self._flush_scheduled:
            return
        self._flush_scheduled = False
        pending, self._pending = self._pending, {}
        try:
            for peer, frames in pending.items():
                self.frames_sent += len(frames)
                try:
                    parts = joined(frames)  # one part for a batch of small messages (the receiver splits it)
                    self._socket.send([peer, *parts] if self._routed else parts, check_pending=False)
                except PeerUnreachable as error:
                    if self._on_unreachable is not None:
                        self._on_unreachable(error.identity)
                except zmq.ZMQError as error:
                    logger.warning("could not send %d frame(s): %s", len(frames), error)
        finally:  # once for all the peers sent to (a question to ZeroMQ per send was one per peer of the flush)
            self._socket.check_pending()


def watch_events(
    loop: asyncio.AbstractEventLoop,
    monitor: zmq.Socket[Any],
    on_event: Callable[[int, int], None],
) -> AsyncSocket:
    """Read a socket's connection events from its monitor (`SocketFactory.event_monitor`): `on_event(event,
    value)`, where value is the file descriptor for tcp/ipc."""
    from zmq.utils.monitor import parse_monitor_message

    def handle(frames: Frames) -> None:
        message = parse_monitor_message(frames)
        on_event(int(message["event"]), int(message["value"]))

    return AsyncSocket(loop, monitor, handle)
