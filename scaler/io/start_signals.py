"""SIGINT and SIGTERM while a process starts, before its event loop takes them over: recorded, then acted on where
the start-up waits, instead of raised as a KeyboardInterrupt wherever Python happens to be.

A KeyboardInterrupt raised inside a finaliser (pyzmq's `Context.__del__`, run by the collector during a readiness
probe) is printed as "Exception ignored" and lost: the scheduler then went on starting and served, deaf to the Ctrl-C
it had already been given. A recorded request cannot be lost that way.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

#: The signals that ask a starting process to stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequested(Exception):
    """A stop signal arrived while the process was starting (raised by `StartSignals.raise_if_received`)."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"received {signal_name} while starting")
        self.signal_name = signal_name


class StartSignals:
    """`with StartSignals() as signals:` records SIGINT and SIGTERM (in the main thread; elsewhere it records
    nothing and changes nothing) and restores the previous handlers on leaving. A signal a process ignores (as
    pytest-xdist's workers ignore SIGINT) stays ignored."""

    def __init__(self) -> None:
        self.received: str | None = None  #: the first stop signal's name
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StartSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                previous = signal.getsignal(signum)
                if previous is signal.SIG_IGN:
                    continue
                self._previous[signum] = previous
                signal.signal(signum, self._record)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def raise_if_received(self) -> None:
        """Raise StopRequested once a stop signal has arrived: called where the start-up waits."""
        if self.received is not None:
            raise StopRequested(self.received)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name
