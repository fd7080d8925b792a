"""Discrete-event replay of a task trace against a scaling policy, on a virtual clock.

The model, deliberately small:
- managers heartbeat every `heartbeat_seconds` (staggered); on each heartbeat the policy decides from
  a snapshot and that manager applies its own target, as the scheduler does;
- a manager launches workers up to the sum of the entries it covers (capped by its max); a launched
  worker connects `boot_seconds` later; to shrink it stops workers still booting first, then the
  target's drain list, then other idle workers, and only then busy ones (their task is requeued at
  the front and counted as killed);
- the scheduler gives queued tasks, oldest first, to idle connected workers (one task each) whose
  capabilities cover the task, preferring the longest-connected worker; a task nobody can serve
  does not block those behind it.

The simulation is a pure function of its arguments: no clock, no randomness, no I/O.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from math import ceil

from scaler.policy.capability import capability_names, covers
from scaler.policy.decision import ScalingMemory, clamp_workers
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView
from scaler.policy.traces import Trace
from scaler.protocol.messages import Capabilities, ManagerTarget, WorkerLimit


@dataclass(frozen=True, slots=True)
class SimulatedManager:
    manager_id: str
    capabilities: Capabilities = ()
    max_workers: WorkerLimit = None
    boot_seconds: float = 5.0  #: from launch to connected
    initial_workers: int = 0  #: already connected at t = 0 (a fixed pool; not counted as launches)


@dataclass(frozen=True, slots=True)
class SimulationSettings:
    heartbeat_seconds: float = 2.0
    tail_seconds: float = 60.0  #: keep going after the last task finished, to watch the scale-down
    horizon_seconds: float | None = None  #: hard stop; None: last arrival + 1 hour
    manager_timeout_seconds: float = 10.0


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """Workers per manager (booting or connected) right after one manager's heartbeat."""

    at_seconds: float
    workers: tuple[tuple[str, int], ...]

    def of(self, manager_id: str) -> int:
        return dict(self.workers).get(manager_id, 0)

    @property
    def total(self) -> int:
        return sum(count for _manager_id, count in self.workers)


@dataclass(frozen=True, slots=True)
class SimulationReport:
    policy: str
    worker_seconds: float  #: sum of worker lifetimes, launch to stop (boot time is paid for)
    latency_p50_seconds: float  #: arrival to completion; NaN when no task completed
    latency_p95_seconds: float
    launches: int
    terminations: int
    killed_tasks: int  #: runs lost because a busy worker was stopped
    completed_tasks: int
    unfinished_tasks: int
    end_seconds: float
    timeline: tuple[TimelinePoint, ...]
    warnings: tuple[str, ...] = ()


@dataclass(eq=False, slots=True)
class _Task:
    arrival: float
    duration: float
    capabilities: Capabilities


@dataclass(eq=False, slots=True)
class _Worker:
    worker_id: str
    manager_id: str
    capabilities: Capabilities
    launched_at: float
    connected_at: float | None = None
    stopped_at: float | None = None
    task: _Task | None = None
    run: int = 0  #: bumped per assignment, so a stale completion event is recognised


@dataclass(frozen=True, slots=True)
class _Completion:
    worker: _Worker
    run: int


@dataclass(eq=False, slots=True)
class _Manager:
    spec: SimulatedManager
    alive: list[_Worker] = field(default_factory=list)  #: launch order
    last_heartbeat: float | None = None
    last_target: ManagerTarget | None = None
    launched: int = 0


_Event = _Task | _Worker | _Manager | _Completion


def simulate(
    policy: ScalingPolicy,
    trace: Trace,
    managers: tuple[SimulatedManager, ...],
    settings: SimulationSettings = SimulationSettings(),
) -> SimulationReport:
    return _Simulation(policy, trace, managers, settings).run()


def percentile(values: list[float], percent: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, ceil(percent / 100 * len(ordered)) - 1)]


class _Simulation:
    def __init__(
        self, policy: ScalingPolicy, trace: Trace, managers: tuple[SimulatedManager, ...], settings: SimulationSettings
    ) -> None:
        self._policy = policy
        self._settings = settings
        self._memory = ScalingMemory()
        self._events: list[tuple[float, int, _Event]] = []
        self._sequence = 0
        self._queue: deque[_Task] = deque()
        self._idle: list[_Worker] = []
        self._workers: list[_Worker] = []
        self._managers = {spec.manager_id: _Manager(spec) for spec in managers}
        self._latencies: list[float] = []
        self._timeline: list[TimelinePoint] = []
        self._warnings: dict[str, None] = {}
        self._launches = self._terminations = self._killed = 0
        self._task_count = len(trace)
        self._last_completion = 0.0
        last_arrival = max((arrival.arrival_seconds for arrival in trace), default=0.0)
        self._horizon = settings.horizon_seconds if settings.horizon_seconds is not None else last_arrival + 3600.0
        for arrival in trace:
            task = _Task(arrival.arrival_seconds, arrival.duration_seconds, arrival.capabilities)
            self._push(arrival.arrival_seconds, task)
        for index, manager in enumerate(self._managers.values()):
            for _worker in range(manager.spec.initial_workers):
                self._connect(self._new_worker(manager, 0.0), 0.0)
            self._push(index * settings.heartbeat_seconds / len(self._managers), manager)

    def run(self) -> SimulationReport:
        end = 0.0
        while self._events:
            now, _sequence, event = heapq.heappop(self._events)
            if now > self._horizon:
                end = self._horizon
                break
            if self._is_done(now):
                end = self._last_completion + self._settings.tail_seconds
                break
            end = now
            if isinstance(event, _Task):
                self._queue.append(event)
            elif isinstance(event, _Worker):
                self._connect(event, now)
            elif isinstance(event, _Manager):
                self._heartbeat(event, now)
            else:
                self._finish(event.worker, event.run, now)
            self._dispatch(now)
        return self._report(end)

    def _is_done(self, now: float) -> bool:
        return len(self._latencies) == self._task_count and now >= self._last_completion + self._settings.tail_seconds

    def _push(self, at: float, event: _Event) -> None:
        self._sequence += 1
        heapq.heappush(self._events, (at, self._sequence, event))

    # ---------------------------------------------------------------- workers and tasks

    def _new_worker(self, manager: _Manager, now: float) -> _Worker:
        manager.launched += 1
        spec = manager.spec
        worker = _Worker(f"{spec.manager_id}/{manager.launched}", spec.manager_id, spec.capabilities, now)
        manager.alive.append(worker)
        self._workers.append(worker)
        return worker

    def _connect(self, worker: _Worker, now: float) -> None:
        if worker.stopped_at is None:
            worker.connected_at = now
            self._idle.append(worker)

    def _dispatch(self, now: float) -> None:
        waiting: deque[_Task] = deque()
        while self._queue and self._idle:
            task = self._queue.popleft()
            eligible = [worker for worker in self._idle if covers(worker.capabilities, task.capabilities)]
            if not eligible:
                waiting.append(task)
                continue
            worker = min(eligible, key=lambda candidate: (candidate.connected_at, candidate.launched_at))
            self._idle.remove(worker)
            worker.task = task
            worker.run += 1
            self._push(now + task.duration, _Completion(worker, worker.run))
        waiting.extend(self._queue)
        self._queue = waiting

    def _finish(self, worker: _Worker, run: int, now: float) -> None:
        if worker.stopped_at is not None or worker.run != run or worker.task is None:
            return
        self._latencies.append(now - worker.task.arrival)
        self._last_completion = now
        worker.task = None
        self._idle.append(worker)

    # ---------------------------------------------------------------- managers

    def _heartbeat(self, manager: _Manager, now: float) -> None:
        manager.last_heartbeat = now
        step = self._policy.decide(self._snapshot(now), self._memory)
        self._memory = step.memory
        self._warnings.update(dict.fromkeys(step.warnings))
        target = step.decision.get(manager.spec.manager_id)
        if target is not None:
            manager.last_target = target
            self._reconcile(manager, target, now)
        counts = tuple((manager_id, len(known.alive)) for manager_id, known in self._managers.items())
        self._timeline.append(TimelinePoint(now, counts))
        self._push(now + self._settings.heartbeat_seconds, manager)

    def _reconcile(self, manager: _Manager, target: ManagerTarget, now: float) -> None:
        own_names = capability_names(manager.spec.capabilities)
        wanted = sum(entry.workers for entry in target.entries if capability_names(entry.capabilities) <= own_names)
        wanted = clamp_workers(wanted, manager.spec.max_workers)
        for _launch in range(wanted - len(manager.alive)):
            self._launches += 1
            self._push(now + manager.spec.boot_seconds, self._new_worker(manager, now))
        surplus = len(manager.alive) - wanted
        if surplus > 0:
            for worker in _stop_order(manager.alive, target.drain)[:surplus]:
                self._stop(manager, worker, now)

    def _stop(self, manager: _Manager, worker: _Worker, now: float) -> None:
        worker.stopped_at = now
        manager.alive.remove(worker)
        self._terminations += 1
        if worker in self._idle:
            self._idle.remove(worker)
        if worker.task is not None:
            self._killed += 1
            self._queue.appendleft(worker.task)
            worker.task = None

    # ---------------------------------------------------------------- snapshot and report

    def _snapshot(self, now: float) -> ScalingSnapshot:
        groups: dict[Capabilities, list[float]] = {}  #: capabilities -> [queued, running, oldest arrival]
        for task in self._queue:
            group = groups.setdefault(task.capabilities, [0, 0, task.arrival])
            group[0] += 1
            group[2] = min(group[2], task.arrival)
        connected = [
            worker for manager in self._managers.values() for worker in manager.alive if worker.connected_at is not None
        ]
        for worker in connected:
            if worker.task is not None:
                groups.setdefault(worker.task.capabilities, [0, 0, now])[1] += 1
        return ScalingSnapshot(
            now=now,
            task_groups=tuple(
                TaskGroup(capabilities, int(queued), int(running), now - oldest if queued else 0.0)
                for capabilities, (queued, running, oldest) in groups.items()
            ),
            workers=tuple(
                WorkerView(
                    worker.worker_id,
                    worker.manager_id,
                    worker.capabilities,
                    capacity=1,
                    assigned=0 if worker.task is None else 1,
                    connected_since=worker.connected_at or 0.0,
                )
                for worker in connected
            ),
            managers=tuple(
                ManagerView(
                    manager.spec.manager_id,
                    manager.spec.capabilities,
                    manager.spec.max_workers,
                    manager.last_target,
                    now - manager.last_heartbeat,
                )
                for manager in self._managers.values()
                if manager.last_heartbeat is not None
            ),
            manager_timeout_seconds=self._settings.manager_timeout_seconds,
        )

    def _report(self, end: float) -> SimulationReport:
        lifetimes = (
            min(end, end if worker.stopped_at is None else worker.stopped_at) - worker.launched_at
            for worker in self._workers
        )
        return SimulationReport(
            policy=self._policy.name,
            worker_seconds=sum(lifetimes),
            latency_p50_seconds=percentile(self._latencies, 50),
            latency_p95_seconds=percentile(self._latencies, 95),
            launches=self._launches,
            terminations=self._terminations,
            killed_tasks=self._killed,
            completed_tasks=len(self._latencies),
            unfinished_tasks=self._task_count - len(self._latencies),
            end_seconds=end,
            timeline=tuple(self._timeline),
            warnings=tuple(self._warnings),
        )


def _stop_order(alive: list[_Worker], drain: tuple[str, ...]) -> list[_Worker]:
    """Booting workers (newest first), then the drain list, then idle, then busy (newest first)."""
    by_id = {worker.worker_id: worker for worker in alive}
    booting = [worker for worker in reversed(alive) if worker.connected_at is None]
    drained = [by_id[worker_id] for worker_id in drain if worker_id in by_id and by_id[worker_id].task is None]
    rest = [worker for worker in reversed(alive) if worker.connected_at is not None and worker not in drained]
    rest.sort(key=lambda worker: worker.task is not None)
    return [*booting, *drained, *rest]
