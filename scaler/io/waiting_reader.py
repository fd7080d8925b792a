"""The thread that waits for an answer reads the socket itself.

A socket read by an asyncio loop on its own thread (the client's I/O thread) hands every answer over to the thread
that waits for it: the loop's thread wakes, reads and handles the message, then wakes the waiter, which takes the GIL
from it. That is two more wake-ups per answer than a program that reads its own socket, each a cross-core wake-up
(on a virtual machine, tens of microseconds: an interrupt sent to the other core and that core's wake from halt).

`WaitingReader` removes them. A thread that waits (`wait(done, timeout)`) becomes the socket's reader while it waits:
the loop stops watching the socket's descriptor (`LoopStandby`: an `epoll_ctl` on the loop's own epoll, not a message
to its thread), and the waiter sleeps in `poll` on that descriptor, then reads and handles what came on its own
thread, until `done()` holds. Then the loop watches the socket again, and takes over any message that came meanwhile.

Rules:
1. One waiter reads at a time; another thread that waits meanwhile waits as before (the reader's handling of
   messages completes its futures). The same thread may read again from inside a handler (a future's callback
   that waits on another future): it goes on reading; nothing waits for a thread that is blocked in a callback.
2. Messages are handled in the order they came: reading and handling hold the socket's `reading` lock, which the
   loop's own drain holds too.
3. The loop's thread may still read (after its own sends it drains what their edge hid, `zmq_async`): when it
   handled messages while a waiter reads, it wakes the waiter through a pipe, so that a waiter whose answer the
   loop read does not sleep on. A waiter also wakes when its future completes on another thread (`wake`).
4. Only where the loop is an epoll loop of this module's making (`standby_loop`); elsewhere (macOS, uvloop) `wait`
   returns at once and the waiter waits as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import select
import selectors
import signal
import threading
import time
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

import zmq

from scaler.io.zmq_async import BURST, AsyncSocket

logger = logging.getLogger(__name__)


def _handler_functions() -> tuple[Callable[[int], Any], Callable[[int, Any], Any]]:
    """`getsignal` and `signal`: CPython's C functions where they exist, since `InterruptsHeld` uses them per message
    read and the `signal` module's wrappers convert each value to and from an enum (about 20 times their cost)."""
    try:
        functions = importlib.import_module("_signal")
    except ImportError:  # another interpreter
        return signal.getsignal, signal.signal
    return functions.getsignal, functions.signal


_get_handler, _set_handler = _handler_functions()

#: The longest a reading waiter sleeps before it looks at its `done()` again (a safety net: every event that may
#: complete it also wakes it).
LONGEST_SLEEP_SECONDS = 1.0

_SIGINT = int(signal.SIGINT)


class LoopStandby:
    """Stops and restarts an epoll loop's watch of one descriptor from any thread, without waking the loop: the
    loop's epoll is modified directly (the kernel serialises that with the loop's `epoll_wait`), and the loop's own
    registration of the descriptor is left as it is."""

    def __init__(self, selector: selectors.EpollSelector) -> None:
        self._epoll = select.epoll.fromfd(os.dup(selector.fileno()))  # the same epoll, a descriptor of our own

    def pause(self, fd: int) -> bool:
        """The loop no longer wakes for `fd`; False when it does not watch it (closed meanwhile)."""
        return self._modify(fd, 0)

    def resume(self, fd: int) -> None:
        """The loop wakes for `fd` again (level-triggered, as asyncio registered it)."""
        self._modify(fd, select.EPOLLIN)

    def _modify(self, fd: int, events: int) -> bool:
        try:
            self._epoll.modify(fd, events)
        except (OSError, ValueError):  # no longer registered, or closed
            return False
        return True

    def close(self) -> None:
        self._epoll.close()


def standby_loop() -> tuple[asyncio.AbstractEventLoop, LoopStandby | None]:
    """A new event loop for a socket's own thread, and its standby (None where the platform has no epoll)."""
    if not hasattr(selectors, "EpollSelector"):
        return asyncio.new_event_loop(), None
    selector = selectors.EpollSelector()
    return asyncio.SelectorEventLoop(selector), LoopStandby(selector)


class WaitingReader:
    """Lets the threads that wait on `sock` (an AsyncSocket made with `lock` and `reading`) read it themselves."""

    def __init__(self, sock: AsyncSocket, standby: LoopStandby) -> None:
        self._socket = sock
        self._standby = standby
        self._fd = sock.descriptor
        self._reader: int | None = None  #: the thread reading now
        self._reader_lock = threading.Lock()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        # closed with the reader, never while a thread may still write to it or poll it
        weakref.finalize(self, _close_all, (self._wake_read, self._wake_write))
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN)
        self._poll.register(self._wake_read, select.POLLIN)
        self._closed = False
        sock.after_loop_read = self.wake
        #: what the reading thread's handling of messages runs under: on the main thread, a Ctrl-C's
        #: KeyboardInterrupt is raised after the messages read are handled, not between a read and its handling
        self._guard: Callable[[], contextlib.AbstractContextManager[Any]] | None = None

    @property
    def reading(self) -> bool:
        """A waiter reads the socket now."""
        return self._reader is not None

    def wait(self, done: Callable[[], bool], timeout: float | None) -> None:
        """Read the socket on this thread until `done()` or `timeout` seconds passed. Returns at once when another
        thread reads it (rule 1), or when the socket is closed: the caller then waits as before."""
        me = threading.get_ident()
        if self._reader == me:  # from inside a handler of this thread's own reading (rule 1)
            self._read_until(done, timeout)
            return
        if self._closed or not self._reader_lock.acquire(blocking=False):
            return
        try:
            if self._closed or not self._standby.pause(self._fd):
                return
            self._reader = me
            drained = False
            try:
                drained = self._read_until(done, timeout)
            finally:
                self._reader = None
                # a message that came after the last read signalled the descriptor: the loop's epoll sees it; what
                # waited unread (a read cut short by its limit, or by an exception) is handed to the loop
                self._standby.resume(self._fd)
                if not drained:
                    self._socket.check_pending_from_other_thread()
        finally:
            self._reader_lock.release()

    def wake(self) -> None:
        """Wake the reading waiter, if any, to look at `done()` again (from any thread but its own)."""
        reader = self._reader
        if reader is not None and reader != threading.get_ident():
            try:
                os.write(self._wake_write, b"\0")
            except OSError:  # full (it wakes anyway), or closed
                pass

    def close(self) -> None:
        """The socket is about to close: no waiter reads from now on (a reading one stops at once)."""
        if self._closed:
            return
        self._closed = True
        self.wake()

    def _read_until(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Whether it left nothing unread behind it (every read ended with no message waiting)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._guard = InterruptsHeld if threading.current_thread() is threading.main_thread() else None
        sock = self._socket
        drained = True
        while not done() and not self._closed and not sock.closed:
            try:
                handled = sock.read_waiting(BURST, self._guard)
            except zmq.ZMQError as error:  # the loop's thread meets it too, and reports it
                logger.debug("a waiting reader stops reading: %s", error)
                return False
            drained = handled < BURST
            if handled:
                continue
            if done():
                return True
            sleep = LONGEST_SLEEP_SECONDS
            if deadline is not None:
                sleep = min(sleep, deadline - time.monotonic())
                if sleep <= 0:
                    return True
            for fd, _event in self._poll.poll(sleep * 1000):
                if fd == self._wake_read:
                    try:
                        os.read(self._wake_read, 4096)
                    except OSError:
                        pass
        return drained


class InterruptsHeld:
    """On the main thread: SIGINT's Python handler (KeyboardInterrupt, by default) is held back inside, and called on
    the way out if the signal came meanwhile. A waiter that reads the connection handles messages it read: an exception
    raised between a message's read and the end of its handling would lose it (a future that never completes), which
    could not happen while the client's I/O thread, which signals never interrupt, handled every message."""

    def __init__(self) -> None:
        self._previous: Any = None
        self._caught: tuple[int, FrameType | None] | None = None

    def __enter__(self) -> InterruptsHeld:
        previous = _get_handler(_SIGINT)
        if callable(previous):  # a Python handler (not SIG_IGN, SIG_DFL or one set outside Python)
            self._previous = previous
            _set_handler(_SIGINT, self._hold)
        return self

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self._caught = (signum, frame)

    def __exit__(self, *exc: object) -> None:
        previous = self._previous
        if previous is None:
            return
        _set_handler(_SIGINT, previous)
        caught, self._caught = self._caught, None
        if caught is not None:
            previous(*caught)


def _close_all(descriptors: tuple[int, ...]) -> None:
    for fd in descriptors:
        try:
            os.close(fd)
        except OSError:
            pass
