"""Choosing and running the asyncio event loop flavour (`builtin` or `uvloop`)."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

EVENT_LOOPS = ("builtin", "uvloop")

T = TypeVar("T")


def new_event_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "builtin":
        return asyncio.new_event_loop()
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:
            # commands and SchedulerClusterCombo refuse this before they start (`scaler.config.event_loops`)
            raise RuntimeError(
                "event loop 'uvloop' needs the uvloop package, which is not installed: "
                "pip install 'scaler-compute[uvloop]', or use the builtin event loop"
            ) from None
        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        return loop
    raise ValueError(f"unknown event loop {kind!r}: choose one of {', '.join(EVENT_LOOPS)}")


def run(main: Coroutine[Any, Any, T], kind: str = "builtin") -> T:
    """Run a coroutine to completion on a fresh loop of the given flavour, then close the loop."""
    loop = new_event_loop(kind)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            close_loop(loop)


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a process's loop, one that may have taken signals over (`add_signal_handler`). A loop closes its self-pipe
    before it gives the signals back, so a signal in between (a second Ctrl-C, which reaches every process of the
    terminal's group while they stop) found the process's wakeup fd closed: "Exception ignored when trying to write to
    the signal wakeup fd" and a traceback on the user's terminal. Signals no longer write to it from here on; they are
    still handled."""
    if threading.current_thread() is threading.main_thread():
        signal.set_wakeup_fd(-1)
    loop.close()
