"""SimulatedStack: the real shells around their real cores, in one process, on simulated time and network.

The scheduler server (`SchedulerServer` around `SchedulerCore`), the object storage server, and worker agents
(`WorkerAgent` around `AgentCore`) run exactly as in production, except that their sockets come from a
`MemoryNetwork` and their clock is a `FakeClock`: the loop jumps to the next deadline whenever everything waits.
Workers' processors are `SimulatedProcessors` (the real processor core, tasks that compute for the time their
script says); clients are `SimulatedClient`s (the real client core). So a scenario with a scheduler killed and
started again 50 s later, heartbeats, grace periods, timeouts, staging and batching runs in milliseconds, the same
way on a busy machine as on an idle one.

    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=2)
        client = await stack.client()
        futures = client.submit([stack.task(1, seconds=3.0)])
        await stack.until(lambda: all(f.done() for f in futures), "the result")

    stack.run(scenario())

What it does not cover: real processes, real sockets and real pickling (the integration tier's).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from scaler.config.sections import ObjectStorageServerConfig
from scaler.object_storage.server import serve as serve_object_storage
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, GraphID, TaskID
from scaler.scheduler.core.scheduler_core import SchedulerCore
from scaler.scheduler.core.settings import CoreSettings
from scaler.scheduler.server import SchedulerServer
from scaler.worker.agent.core import AgentCore, AgentSettings
from scaler.worker.agent.shell import WorkerAgent, build_hello
from scaler.worker.executors.contract import Executor
from scaler_rehearsal.testing.fake_clock import FakeClock
from scaler_rehearsal.testing.memory_network import MemoryNetwork, MemorySockets
from scaler_rehearsal.testing.simulated_client import SimulatedClient
from scaler_rehearsal.testing.simulated_processors import SUCCESS, RunLog, SimulatedProcessors, script_body

T = TypeVar("T")

SCHEDULER_ADDRESS = "tcp://scheduler.sim:2345"
STORAGE_ADDRESS = "tcp://storage.sim:2346"
MONITOR_ADDRESS = "tcp://scheduler.sim:2347"
#: How long `until` waits by default, and how often it looks, in simulated seconds.
UNTIL_SECONDS = 600.0
POLL_SECONDS = 0.01
#: Loggers whose exceptions mean a shell dropped an event a core failed on: a simulation fails on them.
SHELL_LOGGERS = ("scaler.scheduler.server", "scaler.worker.agent.shell", "scaler.io.zmq_async")


@dataclass
class SimulatedWorker:
    name: str
    core: AgentCore
    agent: WorkerAgent
    processors: SimulatedProcessors
    sockets: MemorySockets
    run: asyncio.Task[int]

    @property
    def exit_code(self) -> int | None:
        return self.run.result() if self.run.done() and not self.run.cancelled() else None


class _FailureRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.failures.append(f"{record.name}: {record.getMessage()}")


class SimulatedStack:
    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock()
        self.network = MemoryNetwork()
        self.log = RunLog()
        self.scheduler_core: SchedulerCore | None = None
        self.scheduler: SchedulerServer | None = None
        self.instances = 0  #: schedulers started
        self.workers: dict[str, SimulatedWorker] = {}
        self.clients: list[SimulatedClient] = []
        self._scheduler_run: asyncio.Task[str] | None = None
        self._scheduler_sockets: MemorySockets | None = None
        self._storage_stop: asyncio.Event | None = None
        self._storage_run: asyncio.Task[None] | None = None
        self._numbers = 0

    # ------------------------------------------------------------ running a scenario

    def run(self, scenario: Coroutine[Any, Any, T]) -> T:
        """Run `scenario` on the fake clock; then stop everything. Fails if a shell dropped an event because a core
        raised on it."""
        recorder = _FailureRecorder()
        loggers = [logging.getLogger(name) for name in SHELL_LOGGERS]
        for logger in loggers:
            logger.addHandler(recorder)

        async def main() -> T:
            try:
                return await scenario
            finally:
                await self.close()

        try:
            result = self.clock.run(main())
        finally:
            for logger in loggers:
                logger.removeHandler(recorder)
        assert not recorder.failures, f"a shell dropped events a core failed on: {recorder.failures}"
        return result

    async def start(self, workers: int = 1, **worker_settings: Any) -> None:
        """Object storage, a scheduler, and `workers` workers (named w1, w2, ...), registered."""
        self.start_storage()
        self.start_scheduler()
        for number in range(1, workers + 1):
            self.add_worker(f"w{number}", **worker_settings)
        await self.until(lambda: self.registered_workers() == workers, f"{workers} worker(s) to register")

    async def until(self, condition: Callable[[], bool], what: str, within: float = UNTIL_SECONDS) -> None:
        """Wait until `condition()` holds, checked every POLL_SECONDS of simulated time (a check that waited on
        nothing would never let time move); fail after `within` simulated seconds."""
        deadline = self.clock.now() + within
        while not condition():
            if self.clock.now() > deadline:
                raise AssertionError(f"not within {within:g} simulated seconds: {what}")
            await self.clock.sleep(POLL_SECONDS)

    async def close(self) -> None:
        for client in self.clients:
            client.close()
        for worker in self.workers.values():
            if not worker.run.done():
                worker.run.cancel()
        await asyncio.gather(*(worker.run for worker in self.workers.values()), return_exceptions=True)
        if self.scheduler is not None and self._scheduler_run is not None and not self._scheduler_run.done():
            self.scheduler.stop("the simulation ended")
            await asyncio.gather(self._scheduler_run, return_exceptions=True)
        if self._storage_stop is not None and self._storage_run is not None:
            self._storage_stop.set()
            await asyncio.gather(self._storage_run, return_exceptions=True)

    # ------------------------------------------------------------ object storage and scheduler

    def start_storage(self) -> None:
        self._storage_stop = asyncio.Event()
        config = ObjectStorageServerConfig(bind_address=STORAGE_ADDRESS)
        sockets = self.network.sockets()
        self._storage_run = asyncio.ensure_future(
            serve_object_storage(config, stop=self._storage_stop, sockets=sockets)
        )

    def start_scheduler(self, **settings: Any) -> SchedulerCore:
        """A new scheduler instance at the scheduler's address (a new instance id, knowing nothing)."""
        self.instances += 1
        core_settings = CoreSettings(
            scheduler_address=SCHEDULER_ADDRESS,
            object_storage_address=STORAGE_ADDRESS,
            python_version=local_python_version(),
            instance_id=os.urandom(8),
        )
        core = self.scheduler_core = SchedulerCore(replace(core_settings, **settings), strict=True)
        self._scheduler_sockets = self.network.sockets()
        server = self.scheduler = SchedulerServer(
            core, SCHEDULER_ADDRESS, MONITOR_ADDRESS, STORAGE_ADDRESS, self._scheduler_sockets, clock=self.clock
        )
        self._scheduler_run = asyncio.ensure_future(server.run())
        return core

    def kill_scheduler(self) -> None:
        """SIGKILL: its sockets are cut off at once (nothing it still sends leaves), its loop stops."""
        assert self._scheduler_run is not None and self._scheduler_sockets is not None
        self.network.crash(self._scheduler_sockets)
        self._scheduler_run.cancel()

    # ------------------------------------------------------------ workers

    def add_worker(
        self,
        name: str,
        slots: int = 1,
        max_staged_tasks: int = 64,
        executor: Executor | None = None,
        capabilities: m.Capabilities = (),
        **settings: Any,
    ) -> SimulatedWorker:
        """A worker agent with `slots` slots offering `capabilities`; its processors are simulated
        (SimulatedProcessors, each with its own link to the scheduler, staging up to `max_staged_tasks`) unless
        `executor` is given (an offload proxy's, say); `settings`: AgentSettings fields."""
        sockets = self.network.sockets()
        worker_id = f"Worker|SIM|{name}".encode()
        processors = SimulatedProcessors(self.clock, self.log, name, max_staged_tasks)
        executor = executor if executor is not None else processors
        agent_settings = AgentSettings(
            scheduler_address=SCHEDULER_ADDRESS, slots=slots, max_staged_tasks=executor.max_staged_tasks, **settings
        )
        core = AgentCore(agent_settings, self.clock.now(), processor_prefix=name.encode())
        hello = build_hello(capabilities, core, "", "SIM")
        agent = WorkerAgent(
            core, worker_id, SCHEDULER_ADDRESS, hello, executor, sockets, clock=self.clock, handle_signals=False
        )
        worker = self.workers[name] = SimulatedWorker(name, core, agent, processors, sockets,
                                                      asyncio.ensure_future(agent.run()))  # fmt: skip
        return worker

    def kill_worker(self, name: str) -> None:
        """SIGKILL of a worker and its processors."""
        worker = self.workers[name]
        self.network.crash(worker.sockets)
        worker.processors.close()
        worker.run.cancel()

    def registered_workers(self) -> int:
        return 0 if self.scheduler_core is None else len(self.scheduler_core.workers)

    # ------------------------------------------------------------ clients and tasks

    async def client(self, name: str = "c", **settings: Any) -> SimulatedClient:
        """A client connected to the scheduler (registered once this returns)."""
        client = SimulatedClient(self.network.sockets(), self.clock, SCHEDULER_ADDRESS, name, **settings)
        self.clients.append(client)
        client.start()
        await self.until(lambda: client.connections > 0, f"client {name} to register")
        return client

    def task(
        self,
        client: SimulatedClient,
        seconds: float = 0.0,
        ending: str = SUCCESS,
        function: str = "f",
        priority: int = 0,
        graph: GraphID = GraphID(b""),  # noqa: B008 - a NewType of immutable bytes
        dependencies: tuple[TaskID, ...] = (),
    ) -> m.Task:
        """A task of `client` that computes `seconds` of simulated time, of function `function` (what a worker
        learns run times by), and ends as `ending` says (simulated_processors); a graph's node names its `graph` and
        the nodes it needs."""
        self._numbers += 1
        task_id = TaskID(self._numbers.to_bytes(16, "big"))
        body = script_body(seconds, ending, value=str(self._numbers).encode())
        return m.Task(task_id, ClientID(client.identity), body, function, priority, (), graph, dependencies)
