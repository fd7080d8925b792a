"""What code running inside a processor can learn about its surroundings.

Kept free of heavy imports: the client reads it to find the scheduler when `Client()` is created
inside a task without an address, to give nested tasks a higher priority than their parent, and to
tell the worker that the task is about to wait on nested futures (so its slot can serve them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scaler.io.sockets import TransportSecurity


@dataclass
class ProcessorContext:
    scheduler_address: str
    task_priority: int = 0
    #: called by the task's main thread before/after it waits on futures of nested tasks
    on_block: Callable[[], None] | None = None
    on_unblock: Callable[[], None] | None = None
    #: how the worker's connections are secured; a Client created inside the task uses it too
    security: TransportSecurity | None = None


_current: ProcessorContext | None = None


def current() -> ProcessorContext | None:
    return _current


def install(context: ProcessorContext | None) -> None:
    global _current
    _current = context


class BlockingWait:
    """Context manager around a wait on nested futures: yields the task's slot while waiting.

    Only the processor's main thread talks to the agent; waits on other threads do not yield."""

    def __init__(self) -> None:
        context = _current
        is_main = threading.current_thread() is threading.main_thread()
        self._context = context if context is not None and context.on_block is not None and is_main else None

    def __enter__(self) -> None:
        if self._context is not None and self._context.on_block is not None:
            self._context.on_block()

    def __exit__(self, *exc: object) -> None:
        if self._context is not None and self._context.on_unblock is not None:
            self._context.on_unblock()
