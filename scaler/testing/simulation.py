"""SimulatedCluster: the real SchedulerCore with fake clients, workers and managers in memory, on a fake clock.

No sockets, no processes, no real time: races (a result racing a cancel, a worker dying mid-task, a
graph finishing while it is cancelled, a task given back while it is cancelled) replay deterministically
from a seed. Fake workers obey the worker protocol (credit, results, cancel confirmations, giving back
tasks they have not started); fake managers (`fake_managers.py`) take targets, run the real
`Reconciler` and boot workers after a delay on the fake clock; fake clients record every answer, so
tests can check that each task ends exactly once.

The core runs `strict`: a handler that raises fails the test instead of being logged and dropped.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.effects import Effect, Send
from scaler.scheduler.core.events import Event, PeerLost, Received, Tick
from scaler.scheduler.core.scaling_targets import ScalingHook
from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore
from scaler.scheduler.core.task_state import STATUS_OF_STATE
from scaler.testing.fake_clock import FakeClock

PYTHON = "3.11.7"

#: How long a task runs on an automatic fake worker; None: the test finishes tasks by hand.
Durations = Callable[[m.Task], float] | None


def hello(info: m.RoleInfo, python_version: str = PYTHON, protocol_version: int = m.PROTOCOL_VERSION) -> m.Hello:
    return m.Hello(protocol_version, python_version, 1, "sim", info)


def task(client: bytes, number: int, priority: int = 0, capabilities: m.Capabilities = ()) -> m.Task:
    return m.Task(TaskID(number.to_bytes(16, "big")), ClientID(client), b"body", "f", priority, capabilities)


def success(task_id: TaskID, value: bytes = b"v") -> m.TaskResult:
    return m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, value)


@dataclass
class FakeWorker:
    peer: PeerID
    capacity: int = 1  #: credit announced to the scheduler
    slots: int = 1  #: tasks run at once; the other held tasks wait at the worker (prefetch)
    held: list[TaskID] = field(default_factory=list)  #: tasks the scheduler gave it, in order
    started: set[TaskID] = field(default_factory=set)  #: the held tasks it runs (cannot be given back)
    alive: bool = True
    durations: Durations = None
    interrupted: int = 0  #: started tasks lost when it left or died


@dataclass
class FakeClient:
    peer: PeerID
    #: every final answer about each task: ("result", status) or ("cancelled", outcome)
    answers: dict[TaskID, list[tuple[str, str]]] = field(default_factory=dict)
    answered_at: dict[TaskID, float] = field(default_factory=dict)  #: fake time of the first answer
    errors: list[str] = field(default_factory=list)


class SimulatedCluster:
    def __init__(
        self,
        settings: CoreSettings | None = None,
        seed: int = 0,
        scaling: ScalingHook | None = None,
        strict: bool = True,
    ) -> None:
        self.settings = settings or CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON)
        self.core = SchedulerCore(self.settings, scaling, strict=strict)
        self.clock = FakeClock()
        self.random = random.Random(seed)
        self.workers: dict[PeerID, FakeWorker] = {}
        self.clients: dict[PeerID, FakeClient] = {}
        #: what other fakes (managers) receive: peer -> handler of the messages sent to it
        self.receivers: dict[PeerID, Callable[[m.Message], None]] = {}
        self.effects: list[Effect] = []
        self.serial_numbers = itertools.count(1)  #: for names of fakes made on the way (units)

    @property
    def now(self) -> float:
        return self.clock.now

    # ------------------------------------------------------------ driving the core

    def feed(self, event: Event) -> list[Effect]:
        effects = self.core.handle(event)
        self.effects.extend(effects)
        for effect in effects:
            if isinstance(effect, Send):
                self._deliver(effect.peer, effect.message)
        return effects

    def send(self, peer: bytes, message: m.Message) -> list[Effect]:
        return self.feed(Received(PeerID(peer), message, self.now))

    def advance(self, seconds: float) -> list[Effect]:
        """Run what is due in the next `seconds` (fake workers finishing, managers booting workers), then
        tick once at the end. Returns every effect of that time."""
        start = len(self.effects)
        self.clock.run_until(self.now + seconds)
        self.feed(Tick(self.now))
        return self.effects[start:]

    def run_until(self, end: float, tick_seconds: float = 0.25) -> None:
        """Tick every `tick_seconds` as the scheduler's shell does, running what is due in between."""
        next_tick = self.now + tick_seconds
        while next_tick <= end:
            self.clock.run_until(next_tick)
            self.feed(Tick(self.now))
            next_tick += tick_seconds
        self.clock.run_until(end)

    # ------------------------------------------------------------ peers

    def add_client(self, name: str = "c") -> FakeClient:
        peer = PeerID(b"Client|" + name.encode())
        client = self.clients[peer] = FakeClient(peer)
        self.send(peer, hello(m.ClientInfo(name)))
        return client

    def add_worker(
        self,
        name: str = "w",
        capacity: int = 1,
        capabilities: m.Capabilities = (),
        slots: int = 1,
        durations: Durations = None,
        manager_id: str = "",
        peer: bytes | None = None,
    ) -> FakeWorker:
        worker_peer = PeerID(peer if peer is not None else b"Worker|SIM|" + name.encode())
        worker = FakeWorker(worker_peer, capacity, slots, durations=durations)
        self.workers[worker_peer] = worker
        self.send(worker_peer, hello(m.WorkerInfo(capabilities, capacity, manager_id, "SIM")))
        return worker

    def submit(self, client: FakeClient, tasks: Iterable[m.Task]) -> None:
        for item in tasks:
            client.answers.setdefault(item.task_id, [])
            self.send(client.peer, item)

    def submit_graph(self, client: FakeClient, graph: m.GraphTask) -> None:
        for target in graph.targets:
            client.answers.setdefault(target, [])
        self.send(client.peer, graph)

    def finish(self, worker: FakeWorker, task_id: TaskID | None = None, status: m.ResultStatus | None = None) -> None:
        """The worker completes a task it holds (the oldest one by default)."""
        chosen = task_id if task_id is not None else worker.held[0]
        self._drop(worker, chosen)
        if status is None or status is m.ResultStatus.SUCCESS:
            result = success(chosen)
        else:
            result = m.TaskResult(chosen, status, m.PayloadKind.INLINE, b"error")
        self.send(worker.peer, result)

    def kill(self, worker: FakeWorker) -> None:
        self._stop(worker)
        self.feed(PeerLost(worker.peer, "killed", self.now))

    def leave(self, worker: FakeWorker, reason: str = "scale down") -> None:
        """A graceful stop (SIGTERM): its tasks go back to the queue."""
        self._stop(worker)
        self.send(worker.peer, m.WorkerLeaving(reason))

    def cancel(self, client: FakeClient, task_ids: Iterable[TaskID]) -> None:
        self.send(client.peer, m.TaskCancel(tuple(task_ids)))

    def _stop(self, worker: FakeWorker) -> None:
        worker.alive = False
        worker.interrupted += len(worker.started)
        worker.held.clear()
        worker.started.clear()

    # ------------------------------------------------------------ what fake workers do

    def _hold(self, worker: FakeWorker, task_id: TaskID) -> None:
        worker.held.append(task_id)
        self._start_next(worker)

    def _drop(self, worker: FakeWorker, task_id: TaskID) -> None:
        worker.held.remove(task_id)
        worker.started.discard(task_id)
        self._start_next(worker)

    def _start_next(self, worker: FakeWorker) -> None:
        """Start held tasks, oldest first, while a slot is free; an automatic worker schedules their end."""
        for task_id in worker.held:
            if len(worker.started) >= worker.slots:
                return
            if task_id in worker.started:
                continue
            worker.started.add(task_id)
            if worker.durations is not None:
                record = self.core.tasks.get(task_id)
                duration = worker.durations(record.task) if record is not None else 0.0
                self.clock.call_later(duration, partial(self._finish_on_time, worker, task_id))

    def _finish_on_time(self, worker: FakeWorker, task_id: TaskID) -> None:
        if worker.alive and task_id in worker.started:
            self.finish(worker, task_id)

    def _give_back(self, worker: FakeWorker, asked: tuple[TaskID, ...]) -> None:
        """TaskReturn: the asked tasks it holds and has not started go back; the answer lists them."""
        given = tuple(task_id for task_id in asked if task_id in worker.held and task_id not in worker.started)
        for task_id in given:
            worker.held.remove(task_id)
        self.send(worker.peer, m.TaskReturn(given))

    def _cancel_at(self, worker: FakeWorker, task_ids: tuple[TaskID, ...]) -> None:
        for task_id in task_ids:
            outcome = m.CancelOutcome.NOT_FOUND
            if task_id in worker.held:
                self._drop(worker, task_id)
                outcome = m.CancelOutcome.CANCELED
            self.send(worker.peer, m.TaskCancelConfirm(task_id, outcome))

    # ------------------------------------------------------------ what peers receive

    def _deliver(self, peer: PeerID, message: m.Message) -> None:
        worker = self.workers.get(peer)
        if worker is not None:
            if not worker.alive:
                return
            if isinstance(message, m.Task):
                self._hold(worker, message.task_id)
            elif isinstance(message, m.TaskCancel):
                self._cancel_at(worker, message.task_ids)
            elif isinstance(message, m.TaskReturn):
                self._give_back(worker, message.task_ids)
            return
        receiver = self.receivers.get(peer)
        if receiver is not None:
            receiver(message)
            return
        client = self.clients.get(peer)
        if client is not None:
            self._answer(client, message)

    def _answer(self, client: FakeClient, message: m.Message) -> None:
        if isinstance(message, m.TaskResult):
            client.answers.setdefault(message.task_id, []).append(("result", message.status.value))
            client.answered_at.setdefault(message.task_id, self.now)
        elif isinstance(message, m.TaskCancelConfirm):
            client.answers.setdefault(message.task_id, []).append(("cancelled", message.outcome.value))
            client.answered_at.setdefault(message.task_id, self.now)
        elif isinstance(message, m.ProtocolError):
            client.errors.append(message.reason)

    # ------------------------------------------------------------ checks

    def check_invariants(self) -> None:
        """The scheduler's bookkeeping agrees with itself (raises AssertionError otherwise)."""
        core = self.core
        for peer, worker in core.workers.items():
            assert len(worker.assigned) <= worker.capacity, f"{peer!r} holds more than its capacity"
            for task_id in worker.assigned:
                record = core.tasks.records.get(task_id)
                assert record is not None, "a worker holds a task that is not live"
                assert record.worker == peer, "a task's worker does not hold it"
        for task_id, record in core.tasks.records.items():
            if record.worker is not None:
                assert task_id in core.workers[record.worker].assigned, "a dispatched task is not held by its worker"
        assert len(core.tasks.queue) == sum(1 for r in core.tasks.records.values() if r.state.value == "queued"), (
            "the queue count disagrees with the table"
        )
        counts = core.tasks.tally.totals()
        for state, status in STATUS_OF_STATE.items():
            live = sum(1 for record in core.tasks.records.values() if record.state is state)
            assert getattr(counts, status.value) == live, f"the tally of {status.value} disagrees with the table"
        assert counts.live == len(core.tasks.records)
