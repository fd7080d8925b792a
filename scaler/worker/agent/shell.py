"""The worker agent's asyncio shell around `AgentCore`: the scheduler socket and an executor.

It decides nothing: it decodes, stamps events with its clock's time (`scaler.io.clock`), and performs effects: messages
for the scheduler leave on its socket, processor effects go to the `Executor` (worker/executors/contract.py), whose
reports come back as events. Processors that live in this process (an offload proxy's, threads, simulated ones) have
their links to the scheduler opened here, with this worker's socket factory (`open_link`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import replace

import psutil
import zmq

from scaler.io.clock import REAL_CLOCK, Clock
from scaler.io.sockets import SocketFactory, Sockets
from scaler.io.tunnel.relay import refusal
from scaler.io.zmq_async import AsyncSocket, Outbox, watch_events
from scaler.io.zmq_parts import Frames
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.protocol.handshake import local_python_version
from scaler.security.handshake import HANDSHAKE_FAILURES, is_refusal, refusal_text
from scaler.worker.agent import core
from scaler.worker.computing_mark import computing_task, read_mark
from scaler.worker.executors.contract import Executor
from scaler.worker.executors.hosted_link import HostedLink
from scaler.worker.memory import MemoryWatch, charged_bytes, find_memory_limit
from scaler.worker.storage_route import StorageRoute

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.1
#: How often the computing processors' memory is sampled (for their task's peak), in ticks.
MEMORY_SAMPLE_TICKS = 5
#: How often the host's cache the processors use is checked (it is found again when it is gone), in ticks.
CACHE_CHECK_TICKS = 10
#: After asking to leave, how long to wait for the scheduler's acknowledgement.
LEAVE_TIMEOUT_SECONDS = 3.0


class WorkerAgent:
    def __init__(
        self,
        agent_core: core.AgentCore,
        worker_id: bytes,
        scheduler_address: str,
        hello: m.Hello,
        executor: Executor,
        sockets: Sockets | None = None,
        clock: Clock = REAL_CLOCK,
        handle_signals: bool = True,
        marks_directory: str = "",
        route_storage: Callable[[str], StorageRoute] | None = None,
    ) -> None:
        """`handle_signals`: SIGINT and SIGTERM make the worker leave (off where the process is not the worker's:
        several agents simulated in one loop). `marks_directory`: where processors mark the task they compute
        (worker/computing_mark.py), read when one ends; "": no marks (processors that are no processes).
        `route_storage(address)`: where the processors reach that storage (worker/storage_route.py), found on a thread
        when the core asks (RouteStorage)."""
        self._core = agent_core
        self._worker_id = worker_id
        self._scheduler_address = scheduler_address
        self._hello = hello
        self._executor = executor
        self._sockets: Sockets = sockets if sockets is not None else SocketFactory()
        self._clock = clock  #: every wait; `now` stamps every event
        self._now = clock.now
        self._handle_signals = handle_signals
        self._marks_directory = marks_directory
        self._own_process = psutil.Process()
        self._memory = MemoryWatch(find_memory_limit())
        self._done: asyncio.Future[int] | None = None
        self.exit_reason = ""
        self._refusal_said = False
        self._route_storage = route_storage
        self._route: StorageRoute | None = None  #: held while the worker lives (its use of the host's cache)
        self._routing: asyncio.Future[None] | None = None  #: finding the route (core rule 7)
        self._storage_address = ""  #: the storage the route leads to

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        events = zmq.EVENT_DISCONNECTED | HANDSHAKE_FAILURES  # watched from before it connects: a refusal is heard
        upstream = self._sockets.dealer(self._scheduler_address, identity=self._worker_id, events=events)
        self._upstream = AsyncSocket(loop, upstream, self._on_scheduler_frames)
        self._to_scheduler = Outbox(loop, self._upstream, routed=False)
        monitor = self._sockets.event_monitor(upstream, events)
        self._monitor = watch_events(loop, monitor, self._on_socket_event)
        self._executor.start(loop, self)
        if self._handle_signals:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, self._on_signal, signum)
        self._perform(self._core.start())
        ticker = asyncio.ensure_future(self._tick_routine())
        try:
            return await self._done
        finally:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
            self._to_scheduler.flush()
            await self._clock.sleep(0.02)
            self._executor.close()
            self._monitor.close()
            self._upstream.close()
            self._sockets.close()
            if self._route is not None and self._route.cache is not None:
                self._route.cache.release()

    # ------------------------------------------------------------ inbound

    def _on_scheduler_frames(self, frames: Frames) -> None:
        now = self._now()
        events: list[core.Event] = []
        for frame in frames:
            try:
                for part in codec.split(frame):  # one message, or a batch of them joined in one part
                    events.append(core.FromScheduler(codec.decode(part), now))
            except codec.DecodeError as error:
                logger.warning("undecodable frame from the scheduler: %s", error)
        self._feed(*events)

    def _on_socket_event(self, event: int, value: int) -> None:
        has_keys = getattr(self._sockets, "security", None) is not None
        if is_refusal(event, value, has_keys):  # said once: ZeroMQ retries, and the death timeout ends the wait
            if not self._refusal_said:
                self._refusal_said = True
                hint = "give --curve-secret-key DIR/workers.key_secret --curve-server-key DIR/server.key"
                logger.error("%s", refusal_text("scheduler", "worker", self._scheduler_address, event, has_keys, hint))
            return
        if event & zmq.EVENT_DISCONNECTED:
            self._feed(core.SchedulerDisconnected(self._now()))

    # ------------------------------------------------------------ the executor's reports (ExecutorListener)

    def on_processor_messages(self, processor_id: bytes, messages: list[m.Message]) -> None:
        now = self._now()
        self._feed(*(core.FromProcessor(processor_id, message, now) for message in messages))
        self._to_scheduler.flush_unless_held()

    def on_processor_exit(self, processor_id: bytes, description: str) -> None:
        out_of_memory = self._memory.verdict(processor_id, description)
        task = read_mark(self._marks_directory, processor_id) if self._marks_directory else None
        self._feed(core.ProcessorDied(processor_id, description, self._now(), out_of_memory, task))

    def open_link(
        self, processor_id: bytes, on_work: Callable[[list[m.Message]], None], max_staged_tasks: int = 0
    ) -> HostedLink:
        """The link to the scheduler of a processor that lives in this process (hosted_link.py)."""
        loop = asyncio.get_running_loop()
        sockets = self._sockets
        return HostedLink(loop, sockets, self._scheduler_address, self._worker_id, processor_id, on_work,
                          max_staged_tasks)  # fmt: skip

    def on_executor_failed(self, reason: str) -> None:
        self._finish(core.EXIT_ERROR, reason)

    def _on_signal(self, signum: int) -> None:
        logger.info("received %s: leaving the scheduler", signal.Signals(signum).name)
        self.leave(f"received {signal.Signals(signum).name}")

    def leave(self, reason: str) -> None:
        """Ask the scheduler to let this worker go (what SIGTERM does); it stops once acknowledged, or after
        LEAVE_TIMEOUT_SECONDS without an answer."""
        self._feed(core.LeaveRequested(reason, self._now()))
        self._clock.call_later(
            LEAVE_TIMEOUT_SECONDS, self._finish, core.EXIT_OK, "left without an acknowledgement from the scheduler"
        )

    async def _tick_routine(self) -> None:
        ticks = 0
        while True:
            await self._clock.sleep(TICK_SECONDS)
            refused = refusal(self._scheduler_address)
            if refused is not None:  # a tunnel's certificate or proxy: it will not start answering by waiting
                self._finish(EXIT_CONFIGURATION, refused)
                return
            self._feed(core.AgentTick(self._now()))
            ticks += 1
            if ticks % MEMORY_SAMPLE_TICKS == 0:
                self._sample_memory(computing_only=True)
            if ticks % CACHE_CHECK_TICKS == 0:
                self._check_cache()

    def _sample_memory(self, computing_only: bool) -> dict[bytes, float]:
        """Sample the processors' memory (only those computing, by their mark, between heartbeats); their cpu
        percent."""
        cpu: dict[bytes, float] = {}
        for processor_id in self._core.processors:
            task = computing_task(self._marks_directory, processor_id) if self._marks_directory else None
            if computing_only and not task:
                continue
            cpu[processor_id], charged = self._executor.usage(processor_id)
            self._memory.sample(processor_id, task, charged)
        return cpu

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
                self._executor.send(effect.processor_id, effect.message)
            elif isinstance(effect, core.SayHello):
                hello = replace(self._hello, known_instance=effect.known_instance)
                self._to_scheduler.send(b"", codec.encode(hello))
            elif isinstance(effect, core.SendWorkerHeartbeat):
                self._to_scheduler.send(b"", codec.encode(self._heartbeat(effect.status, effect.round_trip_seconds)))
            elif isinstance(effect, core.SpawnProcessor):
                self._executor.spawn(effect.processor_id)
            elif isinstance(effect, core.KillProcessor):
                self._executor.kill(effect.processor_id, effect.reason)
            elif isinstance(effect, core.Exit):
                self._finish(effect.code, effect.reason)
            elif isinstance(effect, core.RouteStorage):
                self._storage_address = effect.storage_address
                self._routing = asyncio.ensure_future(self._find_route(effect.storage_address))
        self._executor.flush()

    def _check_cache(self) -> None:
        """The host's cache that the processors use is gone (killed): the route is found again (another cache started),
        and the processors configured with it (core rule 7)."""
        route, routing = self._route, self._routing
        if route is None or route.cache is None or (routing is not None and not routing.done()):
            return
        if not route.cache.is_alive():
            logger.warning("the host cache at %s is gone: finding this host's route to object storage again",
                           route.address)  # fmt: skip
            self._routing = asyncio.ensure_future(self._find_route(self._storage_address))

    async def _find_route(self, storage_address: str) -> None:
        """Rule 7 of the core: where the processors reach storage, found on a thread (it may start the host's cache)."""
        if self._route_storage is None:
            route = StorageRoute(storage_address)
        else:
            try:
                route = await asyncio.get_running_loop().run_in_executor(None, self._route_storage, storage_address)
            except Exception:
                logger.exception("finding this host's route to object storage failed: processors read from it directly")
                route = StorageRoute(storage_address)
        if self._route is not None and self._route.cache is not None:
            self._route.cache.release()
        self._route = route
        self._feed(core.StorageRouted(route.address, route.server_key, self._now()))

    def _finish(self, code: int, reason: str) -> None:
        if self._done is not None and not self._done.done():
            self.exit_reason = reason
            log = logger.info if code == core.EXIT_OK else logger.error
            log("worker stopping: %s", reason)
            self._done.set_result(code)

    def _shown_state(self, processor: core.ProcessorRecord) -> str:
        """Its state in the heartbeat: "running" while a task computes there (its mark says so,
        worker/computing_mark.py), else starting, idle or stopping; the scheduler adds the tasks on the processors'
        links to the worker's counts (scheduler/core/view.py `with_link_tasks`)."""
        if processor.state is not core.ProcessorState.READY:
            return str(processor.state.value)
        if self._marks_directory and computing_task(self._marks_directory, processor.processor_id):
            return "running"
        return "idle"

    def _heartbeat(self, status: m.WorkerStatus, round_trip_seconds: float) -> m.Heartbeat:
        cpu_of = self._sample_memory(computing_only=False)
        processors = tuple(
            m.ProcessorStatus(
                processor.pid,
                cpu_of.get(processor.processor_id, 0.0),
                state=self._shown_state(processor),
                memory_bytes=self._memory.bytes_of(processor.processor_id),
            )
            for processor in self._core.processors.values()
        )
        try:
            cpu, rss = self._own_process.cpu_percent(), self._own_process.memory_info().rss
            self._memory.agent_bytes = charged_bytes(self._own_process)
        except psutil.Error:
            cpu, rss = 0.0, 0
        limit = self._memory.limit
        worker_status = m.WorkerStatus(
            status.queued,
            status.running,
            status.blocked,
            psutil.virtual_memory().available,
            processors,
            memory_bytes=self._memory.total_bytes(),
            memory_limit_bytes=limit.limit_bytes,
            memory_limit_source=limit.source,
        )
        return m.Heartbeat(cpu, rss, worker=worker_status, round_trip_seconds=round_trip_seconds)


def build_hello(capabilities: m.Capabilities, agent_core: core.AgentCore, manager_id: str, worker_type: str) -> m.Hello:
    settings = agent_core.settings
    info = m.WorkerInfo(
        capabilities,
        agent_core.capacity,
        manager_id,
        worker_type,
        slots=settings.slots,
        task_timeout_seconds=settings.task_timeout_seconds,
        processor_per_parent=settings.processor_per_parent,
    )
    return m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)
