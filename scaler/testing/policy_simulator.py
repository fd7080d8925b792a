"""Replays a task trace against a scaling policy on the real scheduler core, on a fake clock.

What runs is production code: the `SchedulerCore` (dispatch, credit, balancing), the scaling hook that
turns its view into the policy's snapshot, and each manager's `Reconciler`. Only processes, sockets and
time are simulated (`SimulatedCluster`, `FakeManager`):
- one client submits each task of the trace at its arrival time;
- the core ticks every `tick_seconds`, as its shell does (targets also go out between heartbeats);
- each manager heartbeats every `heartbeat_seconds` (staggered), takes its targets and reconciles; a
  launched unit's worker says hello `boot_seconds` later; a terminated unit's worker leaves gracefully,
  and a task it had started runs again elsewhere (counted as killed);
- a worker runs one task at a time for the task's duration.

Deterministic: the same inputs give the same report (no clock, no randomness, no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from math import ceil

from scaler.policy.protocols import ScalingPolicy
from scaler.policy.traces import Trace
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.scheduler.core.events import FeedSubscriptions
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.scaling_hook import PolicyScalingHook
from scaler.testing.fake_managers import FakeManager, ManagerModel
from scaler.testing.simulation import PYTHON, SimulatedCluster

#: Liveness is not what this simulates: clients and workers are never dropped for silence.
_NEVER_SECONDS = 1e12


@dataclass(frozen=True, slots=True)
class SimulationSettings:
    tick_seconds: float = 0.25  #: the scheduler shell's tick
    tail_seconds: float = 60.0  #: keep going after the last task finished, to watch the scale-down
    horizon_seconds: float | None = None  #: hard stop; None: last arrival + 1 hour
    manager_timeout_seconds: float = 10.0
    allocate: str = "even_load"  #: the dispatcher's allocation ("capability" routes by capability)


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """Units per manager (booting or running) right after one manager's heartbeat."""

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
    worker_seconds: float  #: sum of unit lifetimes, launch to stop (boot time is paid for)
    latency_p50_seconds: float  #: arrival to answer; NaN when no task completed
    latency_p95_seconds: float
    launches: int
    terminations: int
    killed_tasks: int  #: started runs lost because their worker was stopped
    completed_tasks: int
    unfinished_tasks: int
    end_seconds: float
    timeline: tuple[TimelinePoint, ...]


def percentile(values: list[float], percent: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, ceil(percent / 100 * len(ordered)) - 1)]


def simulate(
    policy: ScalingPolicy,
    trace: Trace,
    managers: tuple[ManagerModel, ...],
    settings: SimulationSettings = SimulationSettings(),
) -> SimulationReport:
    replay = _Replay(policy, trace, managers, settings)
    end = replay.run()
    return replay.report(end)


class _Replay:
    def __init__(
        self, policy: ScalingPolicy, trace: Trace, managers: tuple[ManagerModel, ...], settings: SimulationSettings
    ) -> None:
        core_settings = CoreSettings(
            "tcp://simulated:1", "tcp://simulated:2", PYTHON, client_timeout_seconds=_NEVER_SECONDS,
            worker_timeout_seconds=_NEVER_SECONDS, manager_timeout_seconds=settings.manager_timeout_seconds,
            allocate=settings.allocate,
        )  # fmt: skip
        self.policy, self.settings = policy, settings
        self.sim = sim = SimulatedCluster(core_settings, scaling=PolicyScalingHook(policy))
        sim.feed(FeedSubscriptions(frozenset()))  # nobody reads the monitor feed
        self.client = sim.add_client("trace")
        self.arrivals: dict[TaskID, float] = {}
        durations: dict[TaskID, float] = {}
        for number, arrival in enumerate(trace):
            task_id = TaskID(number.to_bytes(16, "big"))
            item = m.Task(task_id, ClientID(self.client.peer), b"", "f", 0, arrival.capabilities)
            self.arrivals[task_id], durations[task_id] = arrival.arrival_seconds, arrival.duration_seconds
            sim.clock.call_at(arrival.arrival_seconds, partial(sim.submit, self.client, [item]))
        self.timeline: list[TimelinePoint] = []
        self.managers = [FakeManager(sim, model, lambda task: durations[task.task_id]) for model in managers]
        for index, manager in enumerate(self.managers):
            manager.after_heartbeat = self._record_point
            manager.start_heartbeats(index * manager.model.heartbeat_seconds / len(self.managers))

    def _record_point(self, _heartbeat_of: FakeManager) -> None:
        workers = tuple((manager.model.manager_id, len(manager.units)) for manager in self.managers)
        self.timeline.append(TimelinePoint(self.sim.now, workers))

    def run(self) -> float:
        """Until `tail_seconds` after the last answer, or the horizon; returns the end time."""
        sim, answered, settings = self.sim, self.client.answered_at, self.settings
        last_arrival = max(self.arrivals.values(), default=0.0)
        horizon = settings.horizon_seconds if settings.horizon_seconds is not None else last_arrival + 3600.0
        while sim.now < horizon:
            if len(answered) == len(self.arrivals) and sim.now >= last_arrival:
                end = min(horizon, max(answered.values(), default=0.0) + settings.tail_seconds)
                sim.run_until(end, settings.tick_seconds)
                return end
            sim.run_until(min(horizon, sim.now + 1.0), settings.tick_seconds)
        return horizon

    def report(self, end: float) -> SimulationReport:
        answered = self.client.answered_at
        latencies = [answered[task_id] - at for task_id, at in self.arrivals.items() if task_id in answered]
        units = [unit for manager in self.managers for unit in manager.every_unit]
        return SimulationReport(
            policy=self.policy.name,
            worker_seconds=sum(min(end, unit.stopped_at or end) - unit.launched_at for unit in units),
            latency_p50_seconds=percentile(latencies, 50),
            latency_p95_seconds=percentile(latencies, 95),
            launches=sum(manager.launches for manager in self.managers),
            terminations=sum(manager.terminations for manager in self.managers),
            killed_tasks=sum(unit.worker.interrupted for unit in units if unit.worker is not None),
            completed_tasks=len(latencies),
            unfinished_tasks=len(self.arrivals) - len(latencies),
            end_seconds=end,
            timeline=tuple(self.timeline),
        )
