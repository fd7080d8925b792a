"""The zygote executor: the agent's processors are processes forked from its zygote, a fork server
(`scaler.io.fork_server`) forked at the agent's start-up, before any thread, event loop or ZeroMQ context exists.

Each request carries one file descriptor: the processor's end of its channel to the agent (see
`scaler.worker.processor.channel`). Processors are attached children: they die with the zygote, which dies with the
agent, so no processor outlives its worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Callable, Sequence

import psutil

from scaler.errors import PreloadError
from scaler.io.child_processes import name_this_process, set_parent_death_signal
from scaler.io.fork_server import ForkServer, describe_wait_status, serve_forks, socket_pair
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.worker.executors.contract import ExecutorListener
from scaler.worker.memory import charged_bytes
from scaler.worker.preload import preimport as run_preimport
from scaler.worker.processor.channel import AsyncChannel

logger = logging.getLogger(__name__)


class Zygote(ForkServer):
    """The agent's handle on its zygote."""

    @classmethod
    def start(cls, run_processor: Callable[[bytes, socket.socket], int], preimport: Sequence[str] = ()) -> Zygote:
        """Fork the zygote. `run_processor(processor_id, channel)` runs in each forked processor. `preimport`: the
        modules the zygote imports before it serves its first fork (`scaler.worker.preload`); when one fails, the
        zygote logs why and exits, and the agent stops (the zygote is gone)."""
        owner_end, server_end = socket_pair()
        pid = os.fork()
        if pid == 0:
            owner_end.close()
            code = 1
            try:
                set_parent_death_signal()
                name_this_process("scaler-zygote")
                try:
                    run_preimport(preimport)
                except PreloadError as error:
                    logger.error("%s; the worker stops", error)
                else:
                    code = serve_forks(
                        server_end,
                        lambda processor_id, _payload, sockets: run_processor(processor_id, sockets[0]),
                        child_name=lambda _processor_id: "scaler-processor",
                        detached=False,
                    )
            finally:
                os._exit(code)
        server_end.close()
        return cls(owner_end, pid)

    def spawn(self, processor_id: bytes) -> socket.socket:
        """Ask for a processor; returns the agent's end of its channel."""
        agent_end, processor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.request(processor_id, fds=[processor_end.fileno()])
        finally:
            processor_end.close()
        return agent_end


class ZygoteExecutor:
    """Processors forked from the zygote, each with its own socket pair to the agent and its own link to the
    scheduler."""

    #: a processor runs the tasks of its link in order (the processor protocol): the scheduler stages tiny ones ahead
    #: (up to about 20 ms of them), so that one read and one send carry many tasks
    max_staged_tasks = 64

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
        try:
            sock = self._zygote.spawn(processor_id)
        except OSError as error:  # the zygote is gone; its "gone" report may not have been read yet
            self._loop.call_soon(listener.on_executor_failed, f"the processor zygote is gone ({error})")
            return
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

    def flush(self) -> None:
        """Nothing: `send` writes at once (a processor is sent only its configuration)."""

    def kill(self, processor_id: bytes, reason: str) -> None:
        pid = self._pids.get(processor_id)
        if pid is None:
            return
        logger.debug("killing processor %d: %s", pid, reason)
        kill_with_descendants(pid)

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        pid = self._pids.get(processor_id)
        if pid is None:
            return 0.0, 0
        process = self._psutil.get(pid)
        try:
            if process is None:
                process = self._psutil[pid] = psutil.Process(pid)
            return process.cpu_percent(), charged_bytes(process)
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
                    channel.read_remaining()  # its ProcessorReady first: it had started
                    channel.close()
                listener.on_processor_exit(processor_id, describe_wait_status(number))
            else:
                if self._loop is not None:
                    self._loop.remove_reader(self._zygote.socket.fileno())
                listener.on_executor_failed("the processor zygote died")
                return


def kill_with_descendants(pid: int) -> None:
    """SIGKILL the processor `pid`, then SIGTERM every process it started that still runs (its children's children
    too, as they were just before the kill): what its task started (a subprocess, a loky or multiprocessing pool)
    ends with the processor instead of living on orphaned (a loky pool's workers until loky's idle timeout, 300 s).
    SIGTERM, not SIGKILL: a pool's resource tracker ignores it and, once the pool's workers are gone, unlinks the
    semaphores and shared memory they registered, then ends; killed, it would leave them in /dev/shm. A process that
    ignores SIGTERM and does not end on its own is left running."""
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for descendant in descendants:
        try:
            descendant.send_signal(signal.SIGTERM)  # psutil checks it is still the process seen (no reused pid)
        except psutil.Error:
            pass


def _decode(processor_id: bytes, frames: list[bytes]) -> list[m.Message]:
    messages = []
    for frame in frames:
        try:
            messages.append(codec.decode(frame))
        except codec.DecodeError as error:
            logger.warning("undecodable frame from processor %s: %s", processor_id, error)
    return messages
