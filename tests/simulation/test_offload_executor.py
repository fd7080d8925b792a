"""The proxy worker's executor against an in-memory remote system, on simulated time (`FakeClock`; blocking calls made
at once, `InlineCalls`): tasks that come on a processor's link become jobs and their outcomes go back on it; cancels
reach the remote system; refusals, lost hosts and jobs that die are reported as the contract says
(worker/executors/contract.py); tasks that arrive within the batch window are one submission, through the real worker
agent and scheduler too."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import cloudpickle
import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, ObjectID, TaskID
from scaler.worker.executors.hosted_link import HostedLink
from scaler.worker.task_execution import run_bundle
from scaler.worker_manager.offload.backend import JobOutcome, OffloadError, RemoteJob
from scaler.worker_manager.offload.executor import BlockingCalls, OffloadExecutor
from scaler_rehearsal.testing.fake_clock import FakeClock
from scaler_rehearsal.testing.simulated_stack import SimulatedStack

T = TypeVar("T")
BATCH_WINDOW_SECONDS = 1.0


class MemoryRemote:
    """Runs bundles when asked (`finish`), or reports what a test scripts for a key."""

    name = "Memory"
    poll_interval_seconds = 0.5

    def __init__(self, batch_window_seconds: float = BATCH_WINDOW_SECONDS) -> None:
        self.batch_window_seconds = batch_window_seconds
        self.lock = threading.Lock()
        self.submitted: list[list[str]] = []
        self.jobs: dict[str, bytes] = {}
        self.scripted: dict[str, JobOutcome] = {}
        self.runnable: set[str] = set()
        self.cancelled: list[str] = []
        self.refuse: str | None = None
        self.closed = False

    def submit(self, jobs: list[RemoteJob]) -> None:
        if self.refuse:
            raise OffloadError(self.refuse)
        with self.lock:
            self.submitted.append([job.key for job in jobs])
            self.jobs.update({job.key: job.bundle for job in jobs})

    def poll(self) -> list[JobOutcome]:
        with self.lock:
            outcomes = [self.scripted.pop(key) for key in list(self.jobs) if key in self.scripted]
            outcomes += [JobOutcome(key, run_bundle(self.jobs[key])) for key in self.runnable if key in self.jobs]
            for outcome in outcomes:
                self.jobs.pop(outcome.key, None)
            self.runnable.clear()
            return outcomes

    def run_all(self) -> None:
        with self.lock:
            self.runnable.update(self.jobs)

    def cancel(self, key: str, reason: str) -> None:
        with self.lock:
            self.cancelled.append(key)
            self.jobs.pop(key, None)

    def close(self) -> None:
        self.closed = True

    def cancel_orphans(self, key_prefix: str) -> int:
        return 0


class FakeLink:
    """A processor's link as the executor sees it: what it says is recorded in its listener's messages."""

    def __init__(self, processor_id: bytes, on_work: Callable[[list[m.Message]], None], listener: Listener) -> None:
        self.processor_id, self.on_work, self.listener = processor_id, on_work, listener
        self.closed = False

    def configure(self) -> None:
        pass

    def send(self, messages: list[m.Message]) -> None:
        self.listener.messages += [(self.processor_id, message) for message in messages]

    def close(self) -> None:
        self.closed = True


class Listener:
    def __init__(self) -> None:
        self.messages: list[tuple[bytes, m.Message]] = []
        self.exits: list[tuple[bytes, str]] = []
        self.links: dict[bytes, FakeLink] = {}

    def open_link(
        self, processor_id: bytes, on_work: Callable[[list[m.Message]], None], max_staged_tasks: int = 0
    ) -> HostedLink:
        self.links[processor_id] = link = FakeLink(processor_id, on_work, self)
        return cast(HostedLink, link)

    def give(self, processor_id: bytes, *work: m.Message) -> None:
        """What comes on a processor's link: its task, a cancel."""
        self.links[processor_id].on_work(list(work))

    def on_processor_messages(self, processor_id: bytes, messages: list[m.Message]) -> None:
        self.messages += [(processor_id, message) for message in messages]

    def on_processor_exit(self, processor_id: bytes, description: str) -> None:
        self.exits.append((processor_id, description))

    def on_executor_failed(self, reason: str) -> None:
        raise AssertionError(reason)

    def results(self) -> dict[bytes, m.TaskResult]:
        return {pid: message for pid, message in self.messages if isinstance(message, m.TaskResult)}


class Storage:
    def __init__(self, objects: dict[bytes, bytes]) -> None:
        self.objects = objects

    def get(self, object_id: bytes) -> bytes:
        return self.objects[object_id]

    def get_frames(self, object_id: bytes, copy_on_write: bool = False) -> list[memoryview]:
        return [memoryview(self.objects[object_id])]

    def put(self, object_id: bytes, payload: bytes, owner_id: bytes = b"", name: str = "") -> None:
        self.objects[object_id] = payload

    def close(self) -> None:
        pass


def task_of(number: int, function: Any, *args: Any, client: bytes = b"Client|t") -> m.Task:
    arguments = tuple(m.Argument(m.ArgumentKind.INLINE, cloudpickle.dumps(value)) for value in args)
    body = codec.encode_body(m.TaskBody(ObjectID(b"f" * 16), arguments))
    return m.Task(TaskID(number.to_bytes(16, "big")), ClientID(client), body)


def double(x: int) -> int:
    return 2 * x


class InlineCalls:
    """Blocking calls made at once, on the loop's thread: with a fake clock, simulated time alone orders events."""

    def submit(self, fn: Callable[..., T], /, *args: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args))
        except BaseException as error:
            future.set_exception(error)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


async def until(predicate: Any, what: str, clock: FakeClock) -> None:
    """Wait for a condition, looking every 10 ms of simulated time, for at most 60 simulated seconds."""
    deadline = clock.now() + 60.0
    while not predicate():
        if clock.now() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await clock.sleep(0.01)


def storage_with_double() -> Storage:
    return Storage({b"f" * 16: cloudpickle.dumps(double)})


def run(scenario: Any, threads: BlockingCalls | None = None, clock: FakeClock | None = None) -> None:
    clock = clock or FakeClock()

    async def main() -> None:
        remote, listener, storage = MemoryRemote(), Listener(), storage_with_double()
        executor = OffloadExecutor(
            remote, lambda address: storage, key_prefix="BAT-unit", clock=clock, threads=threads or InlineCalls()
        )
        executor.start(asyncio.get_running_loop(), listener)
        for pid in (b"p1", b"p2", b"p3"):
            executor.spawn(pid)
            executor.send(pid, m.HelloReply(True, object_storage_address="tcp://storage:1"))
        try:
            await scenario(executor, remote, listener, clock)
        finally:
            executor.close()
        assert remote.closed

    clock.run(main())


def test_tasks_arriving_together_are_one_submission_and_their_results_come_back() -> None:
    async def scenario(executor: OffloadExecutor, remote: MemoryRemote, listener: Listener, clock: FakeClock) -> None:
        await until(lambda: len(listener.messages) == 3, "the processors to be ready", clock)
        assert all(isinstance(message, m.ProcessorReady) for _pid, message in listener.messages)
        for number, pid in enumerate((b"p1", b"p2", b"p3")):
            listener.give(pid, task_of(number, double, number + 10))
        await until(lambda: remote.submitted, "the submission", clock)
        assert remote.submitted == [["BAT-unit-1", "BAT-unit-2", "BAT-unit-3"]]
        remote.run_all()
        await until(lambda: len(listener.results()) == 3, "three results", clock)
        values = {pid: cloudpickle.loads(result.payload) for pid, result in listener.results().items()}
        assert values == {b"p1": 20, b"p2": 22, b"p3": 24}

    run(scenario)


def test_killing_a_processor_cancels_its_remote_job_and_reports_the_exit() -> None:
    async def scenario(executor: OffloadExecutor, remote: MemoryRemote, listener: Listener, clock: FakeClock) -> None:
        listener.give(b"p1", task_of(1, double, 1))
        await until(lambda: remote.submitted, "the submission", clock)
        executor.kill(b"p1", "its task was cancelled")
        await until(lambda: remote.cancelled == ["BAT-unit-1"], "the remote cancel", clock)
        await until(lambda: listener.exits, "the exit report", clock)
        assert listener.exits == [(b"p1", "stopped: its task was cancelled")]
        assert listener.results() == {} and listener.links[b"p1"].closed

    run(scenario)


def test_a_cancel_on_its_link_cancels_the_remote_job_and_is_answered() -> None:
    async def scenario(executor: OffloadExecutor, remote: MemoryRemote, listener: Listener, clock: FakeClock) -> None:
        listener.give(b"p1", task_of(1, double, 1))
        await until(lambda: remote.submitted, "the submission", clock)
        listener.give(b"p1", m.TaskCancel((task_of(1, double, 1).task_id,)))
        await until(lambda: remote.cancelled == ["BAT-unit-1"], "the remote cancel", clock)
        confirm = m.TaskCancelConfirm(task_of(1, double, 1).task_id, m.CancelOutcome.CANCELED)
        assert listener.messages[-1] == (b"p1", confirm)

    run(scenario)


def test_a_refused_submission_fails_the_task_with_the_remote_systems_message() -> None:
    async def scenario(executor: OffloadExecutor, remote: MemoryRemote, listener: Listener, clock: FakeClock) -> None:
        remote.refuse = "job queue 'q' does not exist"
        listener.give(b"p1", task_of(1, double, 1))
        await until(lambda: listener.results(), "the failure", clock)
        result = listener.results()[b"p1"]
        assert result.status is m.ResultStatus.ERROR
        assert result.error_message == "Memory refused the job: job queue 'q' does not exist"

    run(scenario)


@pytest.mark.parametrize("host_lost", [True, False])
def test_a_job_that_ended_without_an_outcome_is_a_lost_host_or_a_dead_processor(host_lost: bool) -> None:
    async def scenario(executor: OffloadExecutor, remote: MemoryRemote, listener: Listener, clock: FakeClock) -> None:
        listener.give(b"p2", task_of(2, double, 2))
        await until(lambda: remote.submitted, "the submission", clock)
        remote.scripted["BAT-unit-1"] = JobOutcome("BAT-unit-1", None, "job 7 FAILED: it broke", host_lost)
        if host_lost:
            await until(lambda: listener.results(), "the result", clock)
            result = listener.results()[b"p2"]
            assert result.status is m.ResultStatus.HOST_LOST and result.error_message == "job 7 FAILED: it broke"
        else:
            await until(lambda: listener.exits, "the exit", clock)
            assert listener.exits == [(b"p2", "job 7 FAILED: it broke")] and listener.links[b"p2"].closed

    run(scenario)


def test_a_remote_system_slow_to_answer_never_blocks_the_agents_loop() -> None:
    """The agent's heartbeats run on its loop: a submit and polls that take a long time must not stall it."""
    gate = threading.Event()

    async def scenario(executor: OffloadExecutor, remote: MemoryRemote, listener: Listener, clock: FakeClock) -> None:
        slow_submit = remote.submit

        def submit(jobs: list[RemoteJob]) -> None:
            gate.wait(5)  # the remote API hangs until the test lets it go
            slow_submit(jobs)

        remote.submit = submit  # type: ignore[method-assign]
        listener.give(b"p1", task_of(1, double, 4))
        ticks = 0
        for _ in range(30):  # loop turns, past the batch window, while the submit is stuck in a thread
            await clock.sleep(BATCH_WINDOW_SECONDS / 10)
            ticks += 1
        assert ticks == 30 and not remote.submitted
        gate.set()
        await until(lambda: remote.submitted, "the submission once the API answers", clock)
        remote.run_all()
        await until(lambda: listener.results(), "the result", clock)
        assert cloudpickle.loads(listener.results()[b"p1"].payload) == 8

    # real threads: the clock waits 10 ms of real time for them before each jump
    run(scenario, threads=concurrent.futures.ThreadPoolExecutor(2), clock=FakeClock(autojump_threshold_seconds=0.01))


@pytest.mark.parametrize("window", [BATCH_WINDOW_SECONDS, 0.0], ids=["window", "window-0"])
def test_tasks_arriving_within_the_batch_window_are_one_submission_through_the_real_agent(window: float) -> None:
    """A proxy worker (the real worker agent, shell and core, with this executor) behind the real scheduler: three
    tasks submitted 0.3 s apart, within one 1 s batch window, are one submission, and their results reach the
    client. Checked with the mechanism off (`window-0`: no window): each task is a submission of its own; and by
    hand in the executor (its flush timer set to 0 s instead of the backend's window): the `window` case fails."""
    stack = SimulatedStack()
    remote, storage = MemoryRemote(batch_window_seconds=window), storage_with_double()

    async def scenario() -> None:
        stack.start_storage()
        stack.start_scheduler()
        executor = OffloadExecutor(
            remote, lambda address: storage, key_prefix="BAT-proxy", clock=stack.clock, threads=InlineCalls()
        )
        stack.add_worker("proxy", slots=3, executor=executor)
        await stack.until(lambda: stack.registered_workers() == 1, "the proxy to register")
        client = await stack.client()
        futures = []
        for number in range(3):
            futures += client.submit([task_of(number, double, number + 10, client=client.identity)])
            await stack.clock.sleep(0.3)
        await stack.until(lambda: len(remote.jobs) == 3, "three jobs at the remote system")
        keys = ["BAT-proxy-1", "BAT-proxy-2", "BAT-proxy-3"]
        assert remote.submitted == ([keys] if window else [[key] for key in keys])
        remote.run_all()
        await stack.until(lambda: all(future.done() for future in futures), "three results")
        results = [future.result for future in futures]
        assert [cloudpickle.loads(result.payload) for result in results if result is not None] == [20, 22, 24]

    stack.run(scenario())
