"""What code running inside a processor can learn about its surroundings.

Kept free of heavy imports: the client reads it to find the scheduler when `Client()` is created
inside a task without an address, to give nested tasks a higher priority than their parent, to tell the
worker that the task is about to wait on nested futures (so its slot can serve them), and to let the
processor know which nested tasks a task submitted (so a stopped parent's children are cancelled with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scaler.io.sockets import TransportSecurity


class TaskThreadHooks(Protocol):
    """The processor's side: which task the calling thread runs, if any, and the hooks around its waits.
    Only a thread that runs a task yields its slot; threads a task starts itself do not."""

    def priority(self) -> int:
        """The priority of the task the calling thread runs (the last task's, on another thread)."""

    def task_id(self) -> bytes:
        """The id of the task the calling thread runs (an actor's calls run on its start task's thread); on a
        thread a task started (an actor's pool of calls), the task computing now; b"" when none is."""

    def on_block(self) -> bool:
        """Before the calling thread waits on nested futures. True: the task yielded its slot (on_unblock
        must follow); False: not a task's thread, nothing done."""

    def on_unblock(self) -> None:
        """After that wait: returns once the task may compute again (it may raise to stop the task)."""

    def on_submitted(self, future: Any) -> None:
        """A nested task's future, made by the calling thread (a ScalerFuture: a stopped parent calls its
        `abandon()`)."""


@dataclass
class ProcessorContext:
    scheduler_address: str
    #: how the worker's connections are secured; a Client created inside the task uses it too
    security: TransportSecurity | None = None
    threads: TaskThreadHooks | None = None
    object_storage_address: str = ""  #: where its worker said object storage is ("" until it said)

    @property
    def task_priority(self) -> int:
        return self.threads.priority() if self.threads is not None else 0


_current: ProcessorContext | None = None


def current() -> ProcessorContext | None:
    return _current


def running_task_id() -> bytes:
    """The task the calling thread runs in this processor (on a thread a task started, the task computing now): b""
    outside a task."""
    context = _current
    return context.threads.task_id() if context is not None and context.threads is not None else b""


def install(context: ProcessorContext | None) -> None:
    global _current
    _current = context


def submitted(future: Any) -> None:
    """Called by a client for each future it makes: a processor hears of those made by its tasks."""
    context = _current
    if context is not None and context.threads is not None:
        context.threads.on_submitted(future)


class BlockingWait:
    """Context manager around a wait on nested futures: yields the task's slot while waiting."""

    def __init__(self) -> None:
        context = _current
        self._threads = context.threads if context is not None else None
        self._yielded = False

    def __enter__(self) -> None:
        if self._threads is not None:
            self._yielded = self._threads.on_block()

    def __exit__(self, *exc: object) -> None:
        if self._yielded and self._threads is not None:
            self._threads.on_unblock()
