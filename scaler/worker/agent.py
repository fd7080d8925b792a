"""The worker agent's asyncio shell around `AgentCore`: scheduler socket, processor channels, zygote.

It decides nothing: it decodes, stamps events with the monotonic clock, and performs effects
(send, spawn a processor through the zygote, kill a processor, exit).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from dataclasses import replace
from typing import Any

import psutil
import zmq

from scaler.io.fork_server import describe_wait_status
from scaler.io.zmq_async import AsyncSocket, Frames, Outbox, configure
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.worker import agent_core as core
from scaler.worker.processor_channel import AsyncChannel
from scaler.worker.zygote import Zygote

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.1
#: How long a busy worker may hold messages for the scheduler to send them together.
COALESCE_SECONDS = 0.001
#: After asking to leave, how long to wait for the scheduler's acknowledgement.
LEAVE_TIMEOUT_SECONDS = 3.0


class WorkerAgent:
    def __init__(
        self,
        agent_core: core.AgentCore,
        worker_id: bytes,
        scheduler_address: str,
        hello: m.Hello,
        zygote: Zygote,
        io_threads: int = 1,
    ) -> None:
        self._core = agent_core
        self._worker_id = worker_id
        self._scheduler_address = scheduler_address
        self._channels: dict[bytes, AsyncChannel] = {}
        self._hello = hello
        self._zygote = zygote
        self._context: zmq.Context[Any] = zmq.Context(io_threads=io_threads)
        self._pids: dict[bytes, int] = {}
        self._psutil: dict[int, psutil.Process] = {}
        self._done: asyncio.Future[int] | None = None
        self.exit_reason = ""

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        upstream = self._context.socket(zmq.DEALER)
        configure(upstream, identity=self._worker_id)
        upstream.connect(self._scheduler_address)
        self._upstream = AsyncSocket(loop, upstream, self._on_scheduler_frames)
        # Results of a busy worker leave in small batches: fewer, larger messages when throughput
        # matters, and no added latency when the worker has nothing else to do.
        self._to_scheduler = Outbox(
            loop, self._upstream, routed=False, coalesce_seconds=COALESCE_SECONDS, is_busy=self._core.has_queued_work
        )
        loop.add_reader(self._zygote.socket.fileno(), self._on_zygote)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._on_signal, signum)
        self._to_scheduler.send(b"", codec.encode(self._hello))
        self._perform(self._core.start())
        ticker = asyncio.ensure_future(self._tick_routine())
        try:
            return await self._done
        finally:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
            self._to_scheduler.flush()
            await asyncio.sleep(0.02)
            loop.remove_reader(self._zygote.socket.fileno())
            self._kill_all_processors()
            for channel in self._channels.values():
                channel.close()
            self._upstream.close()
            self._context.term()
            self._zygote.close()

    # ------------------------------------------------------------ inbound

    def _on_scheduler_frames(self, frames: Frames) -> None:
        now = time.monotonic()
        events: list[core.Event] = []
        for frame in frames:
            try:
                events.append(core.FromScheduler(codec.decode(frame), now))
            except codec.DecodeError as error:
                logger.warning("undecodable frame from the scheduler: %s", error)
        self._feed(*events)

    def _on_processor_frames(self, processor_id: bytes, frames: list[bytes]) -> None:
        now = time.monotonic()
        events: list[core.Event] = []
        for frame in frames:
            try:
                events.append(core.FromProcessor(processor_id, codec.decode(frame), now))
            except codec.DecodeError as error:
                logger.warning("undecodable frame from processor %s: %s", processor_id, error)
        self._feed(*events)
        self._to_scheduler.flush_unless_held()

    def _on_zygote(self) -> None:
        for kind, processor_id, number in self._zygote.read_reports():
            if kind == "started":
                self._pids[processor_id] = number
            elif kind == "exited":
                self._pids.pop(processor_id, None)
                channel = self._channels.pop(processor_id, None)
                if channel is not None:
                    channel.close()
                self._feed(core.ProcessorExited(processor_id, describe_wait_status(number), time.monotonic()))
            else:
                asyncio.get_running_loop().remove_reader(self._zygote.socket.fileno())
                self._finish(core.EXIT_ERROR, "the processor zygote died")

    def _on_signal(self, signum: int) -> None:
        logger.info("received %s: leaving the scheduler", signal.Signals(signum).name)
        self._feed(core.LeaveRequested(f"received {signal.Signals(signum).name}", time.monotonic()))
        asyncio.get_running_loop().call_later(
            LEAVE_TIMEOUT_SECONDS, self._finish, core.EXIT_OK, "left without an acknowledgement from the scheduler"
        )

    async def _tick_routine(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self._feed(core.Tick(time.monotonic()))

    # ------------------------------------------------------------ effects

    def _feed(self, *events: core.Event) -> None:
        try:
            effects = self._core.handle_all(events)
        except Exception:
            logger.exception("the worker core failed on %s; the events are dropped", [type(e).__name__ for e in events])
            return
        self._perform(effects)

    def _perform(self, effects: list[core.Effect]) -> None:
        for effect in effects:
            if isinstance(effect, core.ToScheduler):
                self._to_scheduler.send(b"", codec.encode(effect.message))
            elif isinstance(effect, core.ToProcessor):
                channel = self._channels.get(effect.processor_id)
                if channel is not None:
                    channel.send([codec.encode(effect.message)])
            elif isinstance(effect, core.SayHello):
                info = self._hello.info
                assert isinstance(info, m.WorkerInfo)
                hello = replace(self._hello, info=replace(info, capacity=self._core.capacity))
                self._to_scheduler.send(b"", codec.encode(hello))
            elif isinstance(effect, core.SendHeartbeat):
                self._to_scheduler.send(b"", codec.encode(self._heartbeat(effect.status)))
            elif isinstance(effect, core.SpawnProcessor):
                self._spawn(effect.processor_id)
            elif isinstance(effect, core.KillProcessor):
                self._kill(effect.processor_id, effect.reason)
            elif isinstance(effect, core.Exit):
                self._finish(effect.code, effect.reason)

    def _finish(self, code: int, reason: str) -> None:
        if self._done is not None and not self._done.done():
            self.exit_reason = reason
            log = logger.info if code == core.EXIT_OK else logger.error
            log("worker stopping: %s", reason)
            self._done.set_result(code)

    def _spawn(self, processor_id: bytes) -> None:
        loop = asyncio.get_running_loop()
        sock = self._zygote.spawn(processor_id)
        self._channels[processor_id] = AsyncChannel(
            loop,
            sock,
            lambda frames: self._on_processor_frames(processor_id, frames),
            lambda: self._forget_channel(processor_id),
        )

    def _forget_channel(self, processor_id: bytes) -> None:
        self._channels.pop(processor_id, None)

    def _kill(self, processor_id: bytes, reason: str) -> None:
        pid = self._pids.get(processor_id)
        if pid is None:
            return
        logger.debug("killing processor %d: %s", pid, reason)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _kill_all_processors(self) -> None:
        for processor_id in list(self._pids):
            self._kill(processor_id, "the worker is stopping")

    def _heartbeat(self, status: m.WorkerStatus) -> m.Heartbeat:
        processors = []
        for processor in self._core.processors.values():
            cpu, rss = self._usage(processor.pid) if processor.pid else (0.0, 0)
            processors.append(m.ProcessorStatus(processor.pid, cpu, rss, processor.state.value))
        cpu, rss = self._usage(os.getpid())
        free = psutil.virtual_memory().available
        worker_status = m.WorkerStatus(status.queued, status.running, status.blocked, free, tuple(processors))
        return m.Heartbeat(cpu, rss, worker=worker_status)

    def _usage(self, pid: int) -> tuple[float, int]:
        process = self._psutil.get(pid)
        try:
            if process is None:
                process = self._psutil[pid] = psutil.Process(pid)
            return process.cpu_percent(), process.memory_info().rss
        except psutil.Error:
            self._psutil.pop(pid, None)
            return 0.0, 0


def build_hello(capabilities: m.Capabilities, capacity: int, manager_id: str, worker_type: str) -> m.Hello:
    return m.Hello(
        protocol_version=m.PROTOCOL_VERSION,
        python_version=local_python_version(),
        pid=os.getpid(),
        hostname=socket.gethostname(),
        info=m.WorkerInfo(capabilities, capacity, manager_id, worker_type),
    )
