"""The worker agent's shell around the execution seam, driven with an in-memory executor and a scheduler played by
the test on a ROUTER of the in-memory network, on simulated time (`scaler_rehearsal.testing`): every processor effect
reaches the executor, every report reaches the core, the executor's processors get their links to the scheduler from the
shell (`open_link`), and nothing needs an OS process behind a processor (what a remote executor relies on)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import zmq

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID, new_worker_id
from scaler.worker.agent import core
from scaler.worker.agent.shell import WorkerAgent, build_hello
from scaler.worker.executors.contract import ExecutorListener
from scaler.worker.executors.hosted_link import HostedLink
from scaler_rehearsal.testing.fake_clock import FakeClock
from scaler_rehearsal.testing.memory_network import MemoryNetwork

DEADLINE_SECONDS = 30.0  #: simulated
SCHEDULER_ADDRESS = "tcp://scheduler.sim:1"
STORAGE_ADDRESS = "tcp://127.0.0.1:9"  #: handed to processors; this executor never connects to it
USAGE = (12.5, 4096)


@dataclass
class MemoryExecutor:
    """Slots that exist only as records: ready at once, tasks (on their links) held until the test finishes them."""

    spawned: list[bytes] = field(default_factory=list)
    delivered: list[tuple[bytes, m.Message]] = field(default_factory=list)
    killed: list[tuple[bytes, str]] = field(default_factory=list)
    running: dict[TaskID, bytes] = field(default_factory=dict)
    links: dict[bytes, HostedLink] = field(default_factory=dict)
    closed: bool = False
    _loop: asyncio.AbstractEventLoop | None = None
    _listener: ExecutorListener | None = None

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        self._loop, self._listener = loop, listener

    def spawn(self, processor_id: bytes) -> None:
        self.spawned.append(processor_id)
        self._report(processor_id, m.ProcessorReady(0))  # no OS process: pid 0

    def send(self, processor_id: bytes, message: m.Message) -> None:
        self.delivered.append((processor_id, message))
        if isinstance(message, m.HelloReply) and self._listener is not None:
            if processor_id not in self.links:
                self.links[processor_id] = self._listener.open_link(
                    processor_id, lambda work: self._took(processor_id, work)
                )
            self.links[processor_id].configure()

    def _took(self, processor_id: bytes, work: list[m.Message]) -> None:
        for message in work:
            if isinstance(message, m.Task):
                self.running[message.task_id] = processor_id

    def flush(self) -> None:
        pass  # send() records each message at once

    def kill(self, processor_id: bytes, reason: str) -> None:
        self.killed.append((processor_id, reason))
        link = self.links.pop(processor_id, None)
        if link is not None:
            link.close()
        assert self._loop is not None and self._listener is not None
        self._loop.call_soon(self._listener.on_processor_exit, processor_id, f"remote job cancelled: {reason}")

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        return USAGE

    def close(self) -> None:
        self.closed = True

    def finish(self, task_id: TaskID) -> None:
        result = m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"done")
        self.links[self.running.pop(task_id)].send([result])

    def fail(self, reason: str) -> None:
        assert self._loop is not None and self._listener is not None
        self._loop.call_soon(self._listener.on_executor_failed, reason)

    def _report(self, processor_id: bytes, message: m.Message) -> None:
        assert self._loop is not None and self._listener is not None
        self._loop.call_soon(self._listener.on_processor_messages, processor_id, [message])


class PlayedScheduler:
    """The scheduler's side of the worker's DEALER and of its processors' links, read between the loop's turns."""

    def __init__(self, router: Any, clock: FakeClock) -> None:
        self.router = router
        self.clock = clock
        self.worker = b""
        self.links: list[bytes] = []  #: the processors' links, in the order they said hello
        self.heard: list[m.Message] = []

    async def expect(self, kind: type, matching: object = None) -> m.Message:
        """The next message of `kind` (and, when given, whose fields include `matching`'s). A processor's hello is
        accepted as it comes."""
        deadline = self.clock.now() + DEADLINE_SECONDS
        while self.clock.now() < deadline:
            try:
                sender, *frames = self.router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                await self.clock.sleep(0.01)
                continue
            for message in (codec.decode(part) for frame in frames for part in codec.split(frame)):
                self.heard.append(message)
                if isinstance(message, m.Hello) and isinstance(message.info, m.ProcessorInfo):
                    self.links.append(sender)
                    self.router.send_multipart([sender, codec.encode(m.HelloReply(True))])
                elif b"/" not in sender:
                    self.worker = sender
                if isinstance(message, kind) and (matching is None or matching(message)):  # type: ignore[operator]
                    return message
        raise AssertionError(f"the worker sent no {kind.__name__} within {DEADLINE_SECONDS:g} s: {self.heard}")

    def send(self, message: m.Message, to: bytes = b"") -> None:
        """To the worker's agent, or on a processor's link (`to`)."""
        self.router.send_multipart([to or self.worker, codec.encode(message)])


def task(number: int) -> m.Task:
    return m.Task(TaskID(number.to_bytes(16, "big")), ClientID(b"Client|c"), b"body")


CLOCK = FakeClock()  #: replaced by each test's drive()


async def until(predicate: object, what: str) -> None:
    deadline = CLOCK.now() + DEADLINE_SECONDS
    while not predicate():  # type: ignore[operator]
        if CLOCK.now() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await CLOCK.sleep(0.01)


Script = Callable[[PlayedScheduler, MemoryExecutor], Awaitable[None]]


def drive(executor: MemoryExecutor, script: Script) -> tuple[int, WorkerAgent]:
    """Run an agent around `executor` against a scheduler played by `script`, on a fresh fake clock."""
    global CLOCK
    clock = CLOCK = FakeClock()
    network = MemoryNetwork()

    async def main() -> tuple[int, WorkerAgent]:
        played = network.sockets()
        router = played.router(SCHEDULER_ADDRESS)
        settings = core.AgentSettings(scheduler_address=SCHEDULER_ADDRESS, slots=2, heartbeat_interval_seconds=0.1)
        agent_core = core.AgentCore(settings, clock.now(), processor_prefix=b"mem")
        hello = build_hello((), agent_core, "", "MEM")
        agent = WorkerAgent(agent_core, new_worker_id("MEM"), SCHEDULER_ADDRESS, hello, executor, network.sockets(),
                            clock=clock, handle_signals=False)  # fmt: skip
        scheduler = PlayedScheduler(router, clock)
        run = asyncio.ensure_future(agent.run())
        try:
            await script(scheduler, executor)
            code = await asyncio.wait_for(run, DEADLINE_SECONDS)
        finally:
            run.cancel()
            played.close()
        return code, agent

    return clock.run(main())


async def tasks_results_kill_and_failure(scheduler: PlayedScheduler, executor: MemoryExecutor) -> None:
    await scheduler.expect(m.Hello)
    assert executor.spawned, "the first processor is spawned while the hello travels"
    scheduler.send(m.HelloReply(True, object_storage_address=STORAGE_ADDRESS))
    # Two slots: each processor, configured, says hello on its own link; a task on each reaches the executor.
    for _ in range(2):
        await scheduler.expect(m.Hello, lambda hello: isinstance(hello.info, m.ProcessorInfo))
    assert all(
        message.object_storage_address == STORAGE_ADDRESS
        for _, message in executor.delivered
        if isinstance(message, m.HelloReply)
    )
    scheduler.send(task(1), to=scheduler.links[0])
    scheduler.send(task(2), to=scheduler.links[1])
    await until(lambda: len(executor.running) == 2, "both tasks to reach the executor")
    assert len(set(executor.running.values())) == 2
    # Heartbeats report each processor with the executor's usage (cpu, charged memory) and no pid.
    heartbeat = await scheduler.expect(m.Heartbeat)
    assert isinstance(heartbeat, m.Heartbeat) and heartbeat.worker is not None
    assert [(p.pid, p.cpu_percent, p.memory_bytes) for p in heartbeat.worker.processors] == [(0, *USAGE)] * 2
    scheduler.send(m.HeartbeatEcho())
    await scheduler.expect(m.Heartbeat, lambda h: h.round_trip_seconds > 0)
    # A result the executor's processor reports reaches the scheduler on its link.
    executor.finish(task(1).task_id)
    result = await scheduler.expect(m.TaskResult)
    assert isinstance(result, m.TaskResult) and result.task_id == task(1).task_id and result.payload == b"done"
    # The scheduler has a processor killed (its task was cancelled): through the executor, whose exit is reported.
    processor_of_2 = executor.running[task(2).task_id]
    scheduler.send(m.ProcessorKill(processor_of_2, "its task was cancelled"))
    exited = await scheduler.expect(m.ProcessorExited)
    assert isinstance(exited, m.ProcessorExited) and exited.processor_id == processor_of_2
    assert exited.description == "stopped: its task was cancelled"
    assert (processor_of_2, "its task was cancelled") in executor.killed
    # An executor that cannot go on stops the worker with exit code 1.
    executor.fail("the remote system refuses every call")


def test_the_agent_shell_runs_tasks_on_any_executor() -> None:
    executor = MemoryExecutor()
    code, agent = drive(executor, tasks_results_kill_and_failure)
    assert code == core.EXIT_ERROR
    assert agent.exit_reason == "the remote system refuses every call"
    assert executor.closed


async def shutdown_while_running(scheduler: PlayedScheduler, executor: MemoryExecutor) -> None:
    await scheduler.expect(m.Hello)
    scheduler.send(m.HelloReply(True, object_storage_address=STORAGE_ADDRESS))
    await scheduler.expect(m.Hello, lambda hello: isinstance(hello.info, m.ProcessorInfo))
    scheduler.send(task(1), to=scheduler.links[0])
    await until(lambda: executor.running, "the task to reach the executor")
    scheduler.send(m.Shutdown("the cluster is stopping"))


def test_a_shutdown_kills_every_processor_through_the_executor_and_closes_it() -> None:
    executor = MemoryExecutor()
    code, agent = drive(executor, shutdown_while_running)
    assert code == core.EXIT_OK and "the cluster is stopping" in agent.exit_reason
    stopped = {processor for processor, reason in executor.killed if reason == "the worker is stopping"}
    assert stopped == set(executor.spawned), "every processor the executor started is killed when the worker stops"
    assert executor.closed


def frames_a_scheduler_never_sends() -> list[bytes]:
    """Hostile frames for the worker's side of the scheduler link: the amplification frame, mutations and
    truncations of valid frames, random bytes, and well-formed messages a scheduler never sends a worker. A frame
    that happens to decode to an order a scheduler may give (shutdown, a refusal) is left out: obeying it is right."""
    from tests.integration.test_hostile_peers import hostile_frames

    orders = (m.Shutdown, m.HelloReply, m.ProcessorKill, m.ProcessorsWanted, m.ProtocolError)
    kept = []
    for frame in hostile_frames():
        try:
            if isinstance(codec.decode(frame), orders):
                continue
        except codec.DecodeError:
            pass
        kept.append(frame)
    strangers = (m.Hello(m.PROTOCOL_VERSION, "3.11.7", 1, "host", m.ClientInfo("x")), m.ClientDisconnect(True),
                 m.TaskCancelConfirm(TaskID(b"t" * 16), m.CancelOutcome.CANCELED))  # fmt: skip
    return kept + [codec.encode(message) for message in strangers]


async def hostile_frames_then_a_task(scheduler: PlayedScheduler, executor: MemoryExecutor) -> None:
    await scheduler.expect(m.Hello)
    scheduler.send(m.HelloReply(True, object_storage_address=STORAGE_ADDRESS))
    await scheduler.expect(m.Hello, lambda hello: isinstance(hello.info, m.ProcessorInfo))
    frames = frames_a_scheduler_never_sends()
    for frame in frames:
        scheduler.router.send_multipart([scheduler.worker, frame])
    # the agent goes on: the next honest task reaches the executor and its result comes back
    scheduler.send(task(7), to=scheduler.links[0])
    await until(lambda: task(7).task_id in executor.running, "the honest task to reach the executor")
    executor.finish(task(7).task_id)
    result = await scheduler.expect(m.TaskResult)
    assert isinstance(result, m.TaskResult) and result.task_id == task(7).task_id
    scheduler.send(m.Shutdown("the test is over"))


def test_the_agent_shrugs_off_hostile_frames_on_its_scheduler_link() -> None:
    executor = MemoryExecutor()
    code, agent = drive(executor, hostile_frames_then_a_task)
    assert code == core.EXIT_OK and "the test is over" in agent.exit_reason
