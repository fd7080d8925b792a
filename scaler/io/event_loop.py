"""Choosing and running the asyncio event loop flavour (`builtin` or `uvloop`)."""

from __future__ import annotations

import asyncio
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
            loop.close()
