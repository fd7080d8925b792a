"""SimulatedCluster: the real SchedulerCore with fake clients and workers in memory, on simulated time.

Fake workers register with a processor per slot, each with its own link, as real ones do: their processors hold what
they are given on their links (the first of each runs), confirm cancels, and give back what they have not started
when the scheduler asks (balancing, overtaking); a processor the scheduler has killed is reported gone and replaced.
Clients submit tasks and graphs. Time is a `SimulatedTime`
(`scaler.io.simulated_time`), moved by hand (`advance`). Scaling with managers is simulated by
`scaler.policy_simulator.cluster_simulation` (the real reconciler, with boot times and task durations).

No sockets, no processes, no real time: races (a result racing a cancel, a worker dying mid-task, a
graph finishing while it is cancelled) replay deterministically from a seed. Fake workers obey the
worker protocol (credit, results, cancel confirmations); fake clients record every answer, so tests
can check that each task ends exactly once.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from scaler.io.simulated_time import SimulatedTime
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, GraphID, PeerID, TaskID
from scaler.scheduler.core.effects import Effect, Send
from scaler.scheduler.core.events import Event, PeerLost, Received, Tick
from scaler.scheduler.core.scheduler_core import SchedulerCore
from scaler.scheduler.core.settings import CoreSettings

PYTHON = "3.11.7"

E = TypeVar("E")


def hello(
    info: m.RoleInfo, python_version: str = PYTHON, protocol_version: int = m.PROTOCOL_VERSION, hostname: str = "sim"
) -> m.Hello:
    return m.Hello(protocol_version, python_version, 1, hostname, info)


def task(client: bytes, number: int, priority: int = 0, capabilities: m.Capabilities = ()) -> m.Task:
    return m.Task(TaskID(number.to_bytes(16, "big")), ClientID(client), b"body", "f", priority, capabilities)


def success(task_id: TaskID, value: bytes = b"v") -> m.TaskResult:
    return m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, value)


@dataclass
class FakeWorker:
    peer: PeerID
    capacity: int = 1
    held: list[TaskID] = field(default_factory=list)  #: tasks the scheduler gave it, in order (held[0] runs)
    alive: bool = True
    returned: int = 0  #: tasks it gave back when the scheduler balanced the load
    slots: int = 1
    max_staged: int = 64  #: what its processors' hellos say
    links: list[PeerID] = field(default_factory=list)  #: its processors' links, in the order they said hello
    where: dict[TaskID, PeerID] = field(default_factory=dict)  #: the link each held task came on
    started: int = 0  #: processors started so far (their names: p1, p2, ...)
    beyond_slots: int = 0  #: processors the scheduler wants beyond its slots (ProcessorsWanted)

    @property
    def link(self) -> PeerID:
        """Its first processor's link."""
        return self.links[0]

    def on_link(self, link: bytes) -> list[TaskID]:
        """The tasks held on one link, in order."""
        return [task_id for task_id in self.held if self.where[task_id] == link]


@dataclass
class FakeClient:
    peer: PeerID
    #: every final answer about each task: ("result", status) or ("cancelled", outcome)
    answers: dict[TaskID, list[tuple[str, str]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    online: bool = True  #: False: what the scheduler sends it is lost (its connection is cut or gone)
    #: as a real client does after a resume: an answer for a task already answered is counted here, not recorded
    dedupe: bool = False
    duplicates: int = 0
    answers_epoch: int = 0  #: its answer count (docs/protocol.md 5.15): the epoch, and answers received in it
    answers_received: int = 0
    counting: bool = True  #: False between its ClientResume and the ClientResumed
    unknown: tuple[TaskID, ...] = ()  #: what the latest ClientResumed said the scheduler never received

    def unanswered(self) -> tuple[TaskID, ...]:
        return tuple(task_id for task_id, answers in self.answers.items() if not answers)


class SimulatedCluster:
    def __init__(
        self,
        settings: CoreSettings | None = None,
        seed: int = 0,
        strict: bool = True,
        time: SimulatedTime | None = None,
    ) -> None:
        """`strict`: a handler that raises fails the test (the server logs and drops the event instead). `time`: the
        simulated time to run on (`scaler.io.simulated_time`; its own by default), to share with another simulator."""
        self.settings = settings or CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON)
        self.core = SchedulerCore(self.settings, strict=strict)
        self.time = time if time is not None else SimulatedTime()
        self.random = random.Random(seed)
        self.workers: dict[PeerID, FakeWorker] = {}
        self.clients: dict[PeerID, FakeClient] = {}
        self.effects: list[Effect] = []
        self.graph_targets: set[TaskID] = set()  #: targets of the graphs submitted (for checks)
        self._pending: collections.deque[Send] = collections.deque()  #: sent and not delivered yet, in order
        self._delivering = False

    # ------------------------------------------------------------ driving the core

    def feed(self, event: Event) -> list[Effect]:
        """The core handles the event; what it sends is delivered in the order it was sent, also what a delivery makes
        peers answer (delivered after what the core sent before it, as a socket would: a nested delivery overtaking
        the rest of its step's sends would reorder, say, two ProcessorsWanted)."""
        effects = self.core.handle(event)
        self.effects.extend(effects)
        self._pending.extend(effect for effect in effects if isinstance(effect, Send))
        if self._delivering:
            return effects
        self._delivering = True
        try:
            while self._pending:
                effect = self._pending.popleft()
                self._deliver(effect.peer, effect.message)
        finally:
            self._delivering = False
        return effects

    def send(self, peer: bytes, message: m.Message) -> list[Effect]:
        return self.feed(Received(PeerID(peer), message, self.now))

    def send_burst(self, peer: bytes, messages: Iterable[m.Message]) -> list[Effect]:
        """Messages that one burst of the shell's socket reads brought: one step of the core."""
        effects = self.core.handle_all([Received(PeerID(peer), message, self.now) for message in messages])
        self.effects.extend(effects)
        for effect in effects:
            if isinstance(effect, Send):
                self._deliver(effect.peer, effect.message)
        return effects

    def effects_of(self, kind: type[E]) -> list[E]:
        """Every effect of this type the core returned so far, in order."""
        return [effect for effect in self.effects if isinstance(effect, kind)]

    @property
    def now(self) -> float:
        return self.time.now

    @now.setter
    def now(self, when: float) -> None:
        """Move time on to `when` (timers due by then run), with no Tick: the next event is stamped with it."""
        self.time.advance_to(when)

    def advance(self, seconds: float) -> list[Effect]:
        """Move time on by `seconds`, then give the core its Tick."""
        self.time.advance(seconds)
        return self.feed(Tick(self.now))

    # ------------------------------------------------------------ peers

    def add_client(
        self,
        name: str = "c",
        share: float = 1.0,
        max_running_tasks: int = 0,
        max_workers: int = 0,
        resume_seconds: float = 0.0,
    ) -> FakeClient:
        peer = PeerID(b"Client|" + name.encode())
        client = self.clients[peer] = FakeClient(peer)
        self.send(peer, hello(m.ClientInfo(name, share, max_running_tasks, max_workers, resume_seconds=resume_seconds)))
        return client

    def add_worker(
        self,
        name: str = "w",
        capacity: int = 1,
        capabilities: m.Capabilities = (),
        slots: int = 1,
        max_staged: int = 64,
        task_timeout_seconds: float = 0.0,
        processor_per_parent: bool = False,
        host: str = "sim",
    ) -> FakeWorker:
        """A worker of `host`, registered, and its processors' links (one per slot)."""
        peer = PeerID(b"Worker|SIM|" + name.encode())
        worker = self.workers[peer] = FakeWorker(peer, capacity, slots=slots, max_staged=max_staged)
        info = m.WorkerInfo(capabilities, capacity, "", "SIM", slots=slots, task_timeout_seconds=task_timeout_seconds,
                            processor_per_parent=processor_per_parent)  # fmt: skip
        self.send(peer, hello(info, hostname=host))
        self._keep_processors(worker)
        return worker

    def add_processor(self, worker: FakeWorker) -> PeerID:
        """One more processor of the worker says hello on its link; the link's identity."""
        worker.started += 1
        processor = b"p%d" % worker.started
        link = PeerID(worker.peer + b"/" + processor)
        worker.links.append(link)
        self.send(link, hello(m.ProcessorInfo(processor, worker.peer, max_staged_tasks=worker.max_staged)))
        return link

    def _keep_processors(self, worker: FakeWorker) -> None:
        while worker.alive and len(worker.links) < worker.slots + worker.beyond_slots:
            self.add_processor(worker)

    def submit(self, client: FakeClient, tasks: Iterable[m.Task]) -> None:
        for item in tasks:
            client.answers.setdefault(item.task_id, [])
            self.send(client.peer, item)

    def submit_graph(self, client: FakeClient, graph_number: int, nodes: list[m.Task], targets: list[TaskID]) -> None:
        """Submit a graph; the client waits for answers about its targets only."""
        for target in targets:
            client.answers.setdefault(target, [])
        self.graph_targets.update(targets)
        graph_id = GraphID(graph_number.to_bytes(16, "big"))
        nodes = [replace(node, graph_id=graph_id) for node in nodes]
        self.send(client.peer, m.GraphTask(graph_id, ClientID(client.peer), tuple(nodes), tuple(targets)))

    def finish(self, worker: FakeWorker, task_id: TaskID | None = None, status: m.ResultStatus | None = None) -> None:
        """The worker completes a task it holds (the oldest one by default), on the link it came on."""
        chosen = task_id if task_id is not None else worker.held[0]
        worker.held.remove(chosen)
        if status is None or status is m.ResultStatus.SUCCESS:
            result = success(chosen)
        else:
            result = m.TaskResult(chosen, status, m.PayloadKind.INLINE, b"error")
        self.send(worker.where.pop(chosen), result)

    def link_of(self, task_id: TaskID) -> PeerID:
        """The link of the fake processor that holds the task."""
        for worker in self.workers.values():
            if task_id in worker.where:
                return worker.where[task_id]
        raise KeyError(task_id)

    def kill(self, worker: FakeWorker) -> None:
        worker.alive = False
        worker.held.clear()
        worker.where.clear()
        self.feed(PeerLost(worker.peer, "killed", self.now))

    def processor_died(self, worker: FakeWorker, link: bytes, description: str = "killed by SIGSEGV") -> None:
        """A processor of the worker ends: its agent says so, its link closes, and the agent starts another."""
        self._end_processor(worker, PeerID(link), description)
        self._keep_processors(worker)

    def cancel(self, client: FakeClient, task_ids: Iterable[TaskID]) -> None:
        self.send(client.peer, m.TaskCancel(tuple(task_ids)))

    def heartbeat(self, client: FakeClient) -> list[Effect]:
        """A client's heartbeat, acknowledging the answers it received (docs/protocol.md 5.15)."""
        return self.send(client.peer, m.Heartbeat(answers_epoch=client.answers_epoch,
                                                  answers_received=client.answers_received))  # fmt: skip

    def resume(self, client: FakeClient) -> list[Effect]:
        """A client whose connection was lost asks for what it may have lost (ClientResume)."""
        client.counting = False
        resume = m.ClientResume(client.answers_epoch, client.answers_received, client.unanswered())
        return self.send(client.peer, resume)

    # ------------------------------------------------------------ what peers receive

    def _deliver(self, peer: PeerID, message: m.Message) -> None:
        worker = self.workers.get(peer)
        if worker is not None:
            if worker.alive:
                self._to_worker(worker, message)
            return
        owner = self.workers.get(PeerID(peer.split(b"/", 1)[0]))
        if owner is not None:
            if owner.alive and peer in owner.links:
                self._to_processor(owner, peer, message)
            return
        client = self.clients.get(peer)
        if client is not None and client.online:
            self._to_client(client, message)

    def _to_worker(self, worker: FakeWorker, message: m.Message) -> None:
        """What a worker's agent does: kill a processor when asked (and start another if it keeps fewer than it
        should), keep as many as wanted."""
        if isinstance(message, m.ProcessorKill):
            link = PeerID(worker.peer + b"/" + message.processor_id)
            if link in worker.links:
                self._end_processor(worker, link, f"stopped: {message.reason}")
                self._keep_processors(worker)
        elif isinstance(message, m.ProcessorsWanted):
            worker.beyond_slots = message.beyond_slots
            self._keep_processors(worker)

    def _end_processor(self, worker: FakeWorker, link: PeerID, description: str) -> None:
        worker.links.remove(link)
        lost = worker.on_link(link)
        worker.held = [task_id for task_id in worker.held if task_id not in lost]
        for task_id in lost:
            del worker.where[task_id]
        self.send(worker.peer, m.ProcessorExited(link.split(b"/", 1)[1], description))
        self.feed(PeerLost(link, "connection closed", self.now))

    def _to_processor(self, worker: FakeWorker, link: PeerID, message: m.Message) -> None:
        """What a processor does on its link: hold tasks (the first of each link computes), give back those it has not
        started, confirm cancels."""
        if isinstance(message, m.Task):  # an actor's call too: the processor that hosts the actor holds it
            worker.held.append(message.task_id)
            worker.where[message.task_id] = link
        elif isinstance(message, m.TaskReturn):  # a processor gives back what it has not started (not its first)
            waiting = tuple(task_id for task_id in message.task_ids if task_id in worker.on_link(link)[1:])
            worker.held = [task_id for task_id in worker.held if task_id not in waiting]
            for task_id in waiting:
                del worker.where[task_id]
            worker.returned += len(waiting)
            self.send(link, m.TaskReturn(waiting))
        elif isinstance(message, m.TaskCancel):
            for task_id in message.task_ids:
                if task_id in worker.held:
                    worker.held.remove(task_id)
                    del worker.where[task_id]
                    self.send(link, m.TaskCancelConfirm(task_id, m.CancelOutcome.CANCELED))

    @staticmethod
    def _to_client(client: FakeClient, message: m.Message) -> None:
        if isinstance(message, (m.TaskResult, m.TaskCancelConfirm)):
            client.answers_received += client.counting
            if isinstance(message, m.TaskResult):
                answer = ("result", message.status.value)
            else:
                answer = ("cancelled", message.outcome.value)
            answers = client.answers.setdefault(message.task_id, [])
            if client.dedupe and answers:
                client.duplicates += 1
            else:
                answers.append(answer)
        elif isinstance(message, m.ClientResumed):
            client.answers_epoch, client.answers_received, client.counting = message.answers_epoch, 0, True
            client.unknown = message.unknown
        elif isinstance(message, m.ProtocolError):
            client.errors.append(message.reason)

    # ------------------------------------------------------------ checks

    def _check_links(self) -> None:
        """A dispatched task is held on the link it was sent on (task_lifecycle.py), and that link is its worker's."""
        core = self.core
        for task_id, record in core.tasks.records.items():
            if record.link is not None and record.link in core.processors:
                link = core.processors[record.link]
                assert link.worker == record.worker and task_id in link.tasks, "a task sent on a link is not held there"
        for worker in core.workers.values():
            for link in worker.links:
                assert core.processors[link.peer] is link, "a worker's link is not known"
                assert link.parked == sum(1 for t in link.tasks.values() if t.state.name.endswith("PARKED")), (
                    "a link's parked count disagrees with its tasks"
                )

    def check_invariants(self) -> None:
        """The scheduler's bookkeeping agrees with itself (raises AssertionError otherwise)."""
        core = self.core
        for peer, worker in core.workers.items():
            room = worker.capacity + worker.beside + worker.staging + len(worker.preemption_slots)
            assert len(worker.assigned) <= room, f"{peer!r} holds more than its capacity"
            if not worker.assigned and worker.draining_until is None and worker.takes_tasks:
                assert worker.free_slots > 0, f"{peer!r} holds nothing and is offered no credit"
            for task_id in worker.assigned:
                record = core.tasks.records.get(task_id)
                assert record is not None, "a worker holds a task that is not live"
                assert record.worker == peer, "a task's worker does not hold it"
        for task_id, record in core.tasks.records.items():
            if record.worker is not None:
                assert task_id in core.workers[record.worker].assigned, "a dispatched task is not held by its worker"
            else:
                assert not record.extras.reads_data, "a task no worker holds is counted among a worker's readers"
        for peer, worker in core.workers.items():
            counted = sum(1 for task_id in worker.assigned if core.tasks.records[task_id].extras.reads_data)
            assert worker.readers == counted, f"{peer!r} counts {worker.readers} readers, holds {counted}"
        self._check_links()
        assert len(core.tasks.queue) == sum(1 for r in core.tasks.records.values() if r.state.value == "queued"), (
            "the queue count disagrees with the table"
        )
        recount = {state: 0 for state in core.tasks.live_counts}
        for record in core.tasks.records.values():
            recount[record.state] += 1
        assert recount == core.tasks.live_counts, "the live counts by state disagree with the table"
        live_per_client = {client: sum(counts[:3]) for client, counts in core.tasks.client_counts.items()}
        owned = {client: len(core.tasks.owned_by(client)) for client in core.tasks.client_counts}
        owned = {client: n for client, n in owned.items() if n}
        assert {client: n for client, n in live_per_client.items() if n} == owned, "per-client counts disagree"
        queued_by_function: dict[m.Capabilities, dict[str, int]] = {}
        for record in core.tasks.records.values():
            if record.state.value == "queued":
                functions = queued_by_function.setdefault(core.tasks.queue.key(record), {})
                functions[record.traits.function_name] = functions.get(record.traits.function_name, 0) + 1
        assert queued_by_function == core.tasks.queue.queued_by_function, "queued counts by function disagree"
        queued_by_client: dict[ClientID, dict[m.Capabilities, int]] = {}
        for record in core.tasks.records.values():
            if record.state.value == "queued":
                by_key = queued_by_client.setdefault(record.client_id, {})
                by_key[core.tasks.queue.key(record)] = by_key.get(core.tasks.queue.key(record), 0) + 1
        assert queued_by_client == core.tasks.queue.client_queued, "queued counts by client disagree"
