"""The worker's execution seam: where the tasks the agent core places actually run.

The agent core decides which task runs on which *processor* (an execution slot with an id it chose) and
speaks in effects: spawn a processor, send it a message, kill it. An `Executor` carries those effects out and
reports back what its processors say and when they end. The agent shell (`worker/agent.py`) knows nothing
else about them: no pids, no fork, no socket.

Contract for an executor (what the core relies on):

1. `spawn(pid)`: start a processor. When it can take work it reports `ProcessorReady(pid)` through
   `on_message` (a remote executor may report it at once). A processor that cannot start reports its exit.
2. `send(processor_id, message)`: deliver a message from the core. Processors receive `HelloReply` (with the
   object storage address to use), `Task` (run it), `ProcessorResume` (a blocked parent may go on).
3. A processor reports, through `on_message`: `TaskResult` for the task it ran (once per task), `TaskLog`
   (streamed output), `ProcessorBlocked` / `ProcessorResumeRequest` around waits on nested tasks. An executor
   whose tasks never wait on nested tasks simply never sends the last two.
4. `kill(processor_id, reason)`: stop the processor at once, whatever it runs (cancel, timeout, shutdown).
   Its exit is then reported with `on_exit` (the core expects it and ignores it). A processor that ends on its
   own is reported with `on_exit` too; the core fails the task it ran with `ProcessorDiedError`.
5. `usage(processor_id)`: (cpu percent, rss bytes) of the processor for heartbeats; (0.0, 0) when the
   executor cannot tell (a remote job).
6. `close()`: kill every processor and release what the executor holds.

`ZygoteExecutor` runs processors as processes forked from the worker's zygote (`worker/zygote.py`). The
offloading managers' proxy worker plugs a remote executor in here (one slot per job in flight).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Protocol

import psutil

from scaler.io.fork_server import describe_wait_status
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.worker.processor_channel import AsyncChannel
from scaler.worker.zygote import Zygote

logger = logging.getLogger(__name__)


class ExecutorListener(Protocol):
    """What an executor reports to the agent shell (always on the shell's event loop)."""

    def on_processor_messages(self, processor_id: bytes, messages: list[m.Message]) -> None: ...

    def on_processor_exit(self, processor_id: bytes, description: str) -> None: ...

    def on_executor_failed(self, reason: str) -> None: ...


class Executor(Protocol):
    """Runs the agent core's processors (see the module docstring for the contract)."""

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None: ...

    def spawn(self, processor_id: bytes) -> None: ...

    def send(self, processor_id: bytes, message: m.Message) -> None: ...

    def kill(self, processor_id: bytes, reason: str) -> None: ...

    def usage(self, processor_id: bytes) -> tuple[float, int]: ...

    def close(self) -> None: ...


class ZygoteExecutor:
    """Processors forked from the zygote, each talking to the agent over its own socket pair."""

    def __init__(self, zygote: Zygote) -> None:
        self._zygote = zygote
        self._channels: dict[bytes, AsyncChannel] = {}
        self._pids: dict[bytes, int] = {}
        self._psutil: dict[int, psutil.Process] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: ExecutorListener | None = None

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        self._loop, self._listener = loop, listener
        loop.add_reader(self._zygote.socket.fileno(), self._on_zygote)

    def spawn(self, processor_id: bytes) -> None:
        assert self._loop is not None and self._listener is not None, "start() the executor first"
        listener = self._listener
        sock = self._zygote.spawn(processor_id)
        self._channels[processor_id] = AsyncChannel(
            self._loop,
            sock,
            lambda frames: listener.on_processor_messages(processor_id, _decode(processor_id, frames)),
            lambda: self._forget_channel(processor_id),
        )

    def _forget_channel(self, processor_id: bytes) -> None:
        self._channels.pop(processor_id, None)

    def send(self, processor_id: bytes, message: m.Message) -> None:
        channel = self._channels.get(processor_id)
        if channel is not None:
            channel.send([codec.encode(message)])

    def kill(self, processor_id: bytes, reason: str) -> None:
        pid = self._pids.get(processor_id)
        if pid is None:
            return
        logger.debug("killing processor %d: %s", pid, reason)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        pid = self._pids.get(processor_id)
        if pid is None:
            return 0.0, 0
        process = self._psutil.get(pid)
        try:
            if process is None:
                process = self._psutil[pid] = psutil.Process(pid)
            return process.cpu_percent(), process.memory_info().rss
        except psutil.Error:
            self._psutil.pop(pid, None)
            return 0.0, 0

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._zygote.socket.fileno())
        for processor_id in list(self._pids):
            self.kill(processor_id, "the worker is stopping")
        for channel in list(self._channels.values()):
            channel.close()
        self._channels.clear()
        self._zygote.close()

    def _on_zygote(self) -> None:
        listener = self._listener
        assert listener is not None
        for kind, processor_id, number in self._zygote.read_reports():
            if kind == "started":
                self._pids[processor_id] = number
            elif kind == "exited":
                pid = self._pids.pop(processor_id, None)
                if pid is not None:
                    self._psutil.pop(pid, None)
                channel = self._channels.pop(processor_id, None)
                if channel is not None:
                    channel.close()
                listener.on_processor_exit(processor_id, describe_wait_status(number))
            else:
                if self._loop is not None:
                    self._loop.remove_reader(self._zygote.socket.fileno())
                listener.on_executor_failed("the processor zygote died")
                return


def _decode(processor_id: bytes, frames: list[bytes]) -> list[m.Message]:
    messages = []
    for frame in frames:
        try:
            messages.append(codec.decode(frame))
        except codec.DecodeError as error:
            logger.warning("undecodable frame from processor %s: %s", processor_id, error)
    return messages
