"""A task trace replayed against the real scheduler core, a scaling policy and real reconcilers, on a fake clock.

What runs for real: `SchedulerCore` (dispatch, balancing, the scaling hook and the policy), and each
manager's `Reconciler` (what to launch and what to stop, drain order, back-off). What is simulated:
- one client submits each task of the trace at its arrival time and records when its result comes back;
- a launched unit is one worker that connects `boot_seconds` after its launch; it runs the tasks the
  scheduler gives it one at a time for their trace duration (tasks it holds beyond the running one wait,
  and go back when the scheduler asks for them);
- a manager heartbeats every `heartbeat_seconds` (staggered) and reconciles on every target it receives;
  a unit it terminates leaves gracefully (its tasks go back to the queue; a task that was running counts as
  killed, and runs again from the start).
Time is a `SimulatedTime` (`scaler.io.simulated_time`, the simulators' one model of time): every arrival, boot,
completion, heartbeat and tick is a timer on it. Time and ids are inputs; the run is a pure function of its
arguments (no real clock, no randomness, no I/O).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from math import ceil

from scaler.io.simulated_time import SimulatedTime
from scaler.policy.content import Allocation
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.traces import Trace
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import Event, Received, Tick
from scaler.scheduler.core.scheduler_core import SchedulerCore
from scaler.scheduler.core.settings import CoreSettings
from scaler.scheduler.scaling_hook import PolicyScalingHook
from scaler.worker_manager.backend import UnitInfo, UnitState
from scaler.worker_manager.reconciler import Reconciler, ReconcilerSettings, Target

PYTHON = "3.11.7"  #: the simulated peers' Python; the core only compares it with its settings
CLIENT = PeerID(b"Client|trace")


@dataclass(frozen=True, slots=True)
class SimulatedManager:
    manager_id: str
    capabilities: m.Capabilities = ()
    max_workers: m.WorkerLimit = None
    boot_seconds: float = 5.0  #: from launch to connected
    initial_workers: int = 0  #: connected at t = 0 and never stopped (a fixed pool; not counted as launches)
    worker_cost_per_hour: float = 0.0  #: what one worker costs (the report's cost; the cost policy reads it)
    #: what the manager declares its boot time to be; None: the scheduler hears the measured one
    expected_boot_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class SimulationSettings:
    heartbeat_seconds: float = 2.0  #: managers' heartbeat period
    tick_seconds: float = 0.5  #: the scheduler's clock beat
    tail_seconds: float = 60.0  #: keep going after the last task finished, to watch the scale-down
    horizon_seconds: float | None = None  #: hard stop; None: last arrival + 1 hour
    allocate: Allocation = Allocation.CAPABILITY  #: the dispatcher's allocation (capabilities are honoured)


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """Workers per manager (booting or connected) after a manager's heartbeat or a change of its units."""

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
    latency_p50_seconds: float  #: arrival to result; NaN when no task completed
    latency_p95_seconds: float
    latency_max_seconds: float
    launches: int
    terminations: int
    killed_tasks: int  #: runs lost because a busy worker was stopped
    completed_tasks: int
    unfinished_tasks: int
    peak_workers: int
    end_seconds: float
    timeline: tuple[TimelinePoint, ...]
    warnings: tuple[str, ...] = ()
    cost: float = 0.0  #: unit lifetimes times their manager's worker_cost_per_hour
    capped_seconds: float = 0.0  #: how long a budget held the workers below the need


def percentile(values: list[float], percent: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, ceil(percent / 100 * len(ordered)) - 1)]


def simulate(
    policy: ScalingPolicy,
    trace: Trace,
    managers: tuple[SimulatedManager, ...],
    settings: SimulationSettings = SimulationSettings(),
) -> SimulationReport:
    return _Simulation(policy, trace, managers, settings).run()


# ---------------------------------------------------------------- the simulated peers


@dataclass(eq=False, slots=True)
class _Unit:
    unit_id: str
    manager: _Manager
    launched_at: float
    peer: PeerID
    connected: bool = False
    stopped_at: float | None = None
    held: list[TaskID] = field(default_factory=list)  #: given by the scheduler, running one first
    run: int = 0  #: bumped per task start, so a stale completion is recognised

    @property
    def link(self) -> PeerID:
        """Its one processor's link, where its tasks come and their results leave."""
        return PeerID(self.peer + b"/p1")


@dataclass(eq=False, slots=True)
class _Manager:
    spec: SimulatedManager
    peer: PeerID
    reconciler: Reconciler
    index: int  #: makes unit ids unique across managers
    units: dict[str, _Unit] = field(default_factory=dict)  #: alive (booting or connected), the reconciler's units
    launched: int = 0


class _Simulation:
    def __init__(
        self, policy: ScalingPolicy, trace: Trace, managers: tuple[SimulatedManager, ...], settings: SimulationSettings
    ) -> None:
        self._settings = settings
        self._policy_name = policy.name
        # The simulated client and workers never heartbeat (nothing here is silent by accident), so the scheduler
        # is told never to drop them for silence.
        core_settings = CoreSettings(
            "sim://scheduler", "sim://storage", PYTHON, allocate=settings.allocate,
            heartbeat_interval_seconds=settings.heartbeat_seconds,
            client_timeout_seconds=float("inf"), worker_timeout_seconds=float("inf"),
        )  # fmt: skip
        hook = PolicyScalingHook(policy, core_settings.manager_timeout_seconds)
        self._core = SchedulerCore(core_settings, hook, strict=True)
        self._hook = hook
        self._time = SimulatedTime()
        self._durations: dict[TaskID, float] = {}
        self._arrivals: dict[TaskID, float] = {}
        self._latencies: list[float] = []
        self._last_completion = 0.0
        self._launches = self._terminations = self._killed = self._peak = 0
        self._capped_seconds = 0.0
        self._timeline: list[TimelinePoint] = []
        self._units_by_peer: dict[PeerID, _Unit] = {}
        self._all_units: list[_Unit] = []
        self._managers: dict[PeerID, _Manager] = {}
        last_arrival = max((arrival.arrival_seconds for arrival in trace), default=0.0)
        self._horizon = settings.horizon_seconds if settings.horizon_seconds is not None else last_arrival + 3600.0
        self._feed(Received(CLIENT, _hello(m.ClientInfo("trace")), 0.0))
        for number, arrival in enumerate(trace):
            task_id = TaskID(number.to_bytes(16, "big"))
            self._durations[task_id] = arrival.duration_seconds
            task = m.Task(task_id, ClientID(CLIENT), b"", arrival.function_name, 0, arrival.capabilities)
            self._time.call_at(arrival.arrival_seconds, self._arrive, task)
        for index, spec in enumerate(managers):
            self._add_manager(spec, index * settings.heartbeat_seconds / max(1, len(managers)))
        self._time.call_at(settings.tick_seconds, self._tick)

    # ------------------------------------------------------------ the event loop

    def run(self) -> SimulationReport:
        end = 0.0
        while (now := self._time.next_due()) is not None:
            if now > self._horizon:
                end = self._horizon
                break
            if (
                len(self._latencies) == len(self._durations)
                and now >= self._last_completion + self._settings.tail_seconds
            ):
                end = self._last_completion + self._settings.tail_seconds
                break
            end = now
            self._time.run_next()
        return self._report(end)

    @property
    def _now(self) -> float:
        return self._time.now

    def _arrive(self, task: m.Task) -> None:
        self._arrivals[task.task_id] = self._now
        self._feed(Received(CLIENT, task, self._now))

    def _tick(self) -> None:
        self._feed(Tick(self._now))
        if self._hook.is_budget_capped:
            self._capped_seconds += self._settings.tick_seconds
        self._time.call_later(self._settings.tick_seconds, self._tick)

    def _feed(self, event: Event) -> None:
        for effect in self._core.handle(event):
            if isinstance(effect, Send):
                self._deliver(effect.peer, effect.message)

    def _send(self, peer: PeerID, message: m.Message) -> None:
        self._feed(Received(peer, message, self._now))

    # ------------------------------------------------------------ what the scheduler sends

    def _deliver(self, peer: PeerID, message: m.Message) -> None:
        if peer == CLIENT:
            if isinstance(message, m.TaskResult) and message.task_id in self._arrivals:
                self._latencies.append(self._now - self._arrivals.pop(message.task_id))
                self._last_completion = self._now
            return
        unit = self._units_by_peer.get(peer)
        if unit is not None:
            self._to_unit(unit, message)
            return
        manager = self._managers.get(peer)
        if manager is not None and isinstance(message, m.ManagerTarget):
            self._reconcile(manager, Target.of(message))

    def _to_unit(self, unit: _Unit, message: m.Message) -> None:
        if unit.stopped_at is not None:
            return
        if isinstance(message, m.Task):
            unit.held.append(message.task_id)
            if len(unit.held) == 1:
                self._start(unit)
        elif isinstance(message, m.TaskReturn):
            waiting = [task_id for task_id in message.task_ids if task_id in unit.held[1:]]
            unit.held = [task_id for task_id in unit.held if task_id not in waiting]
            self._send(unit.link, m.TaskReturn(tuple(waiting)))
        elif isinstance(message, m.TaskCancel):
            for task_id in message.task_ids:
                if task_id in unit.held:
                    unit.held.remove(task_id)
                    self._send(unit.link, m.TaskCancelConfirm(task_id, m.CancelOutcome.CANCELED))

    # ------------------------------------------------------------ units (workers)

    def _start(self, unit: _Unit) -> None:
        unit.run += 1
        self._time.call_later(self._durations[unit.held[0]], self._complete, unit, unit.run)

    def _complete(self, unit: _Unit, run: int) -> None:
        if unit.stopped_at is not None or unit.run != run or not unit.held:
            return
        task_id = unit.held.pop(0)
        self._send(unit.link, m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b""))
        if unit.held:
            self._start(unit)

    def _boot(self, unit: _Unit) -> None:
        if unit.stopped_at is not None:
            return
        unit.connected = True
        spec = unit.manager.spec
        info = m.WorkerInfo(spec.capabilities, 1, spec.manager_id, f"SIM-{unit.unit_id}")
        self._send(unit.peer, _hello(info))
        self._send(unit.link, _hello(m.ProcessorInfo(b"p1", unit.peer)))  # its processor's link: its tasks go there

    def _new_unit(self, manager: _Manager, is_fixed: bool = False) -> _Unit:
        """A unit of the manager; a fixed one (an initial worker) is not the reconciler's to stop."""
        manager.launched += 1
        unit_id = f"m{manager.index}u{manager.launched}"
        peer = PeerID(f"Worker|SIM-{unit_id}|{manager.spec.manager_id}".encode())
        unit = _Unit(unit_id, manager, self._now, peer)
        if not is_fixed:
            manager.units[unit_id] = unit
        self._units_by_peer[peer] = self._units_by_peer[unit.link] = unit
        self._all_units.append(unit)
        return unit

    def _stop(self, unit: _Unit) -> None:
        unit.stopped_at = self._now
        unit.manager.units.pop(unit.unit_id, None)
        self._terminations += 1
        if not unit.connected:
            return
        if unit.held:
            self._killed += 1
        unit.held.clear()
        self._send(unit.peer, m.WorkerLeaving("the manager's target is lower"))

    # ------------------------------------------------------------ managers

    def _add_manager(self, spec: SimulatedManager, first_heartbeat: float) -> None:
        peer = PeerID(f"Manager|sim|{spec.manager_id}".encode())
        reconciler = Reconciler(ReconcilerSettings(max_units=spec.max_workers, pending_timeout_seconds=1e9))
        manager = _Manager(spec, peer, reconciler, len(self._managers))
        self._managers[peer] = manager
        for _ in range(spec.initial_workers):
            self._boot(self._new_unit(manager, is_fixed=True))
        info = m.ManagerInfo(
            spec.manager_id, spec.capabilities, spec.max_workers, "sim", spec.worker_cost_per_hour,
            spec.expected_boot_seconds,
        )  # fmt: skip
        self._send(peer, _hello(info))
        self._time.call_at(first_heartbeat, self._heartbeat, manager)

    def _heartbeat(self, manager: _Manager) -> None:
        status = m.ManagerStatus(
            manager.reconciler.units, manager.reconciler.pending_units, manager.reconciler.boot_seconds
        )
        self._send(manager.peer, m.Heartbeat(manager=status))
        self._record_timeline()
        self._time.call_later(self._settings.heartbeat_seconds, self._heartbeat, manager)

    def _reconcile(self, manager: _Manager, target: Target) -> None:
        plan = manager.reconciler.plan(target, list(self._unit_infos(manager)), self._now)
        for unit_id in plan.terminate:
            unit = manager.units.get(unit_id)
            if unit is not None:
                self._stop(unit)
        manager.reconciler.terminating(list(plan.terminate))
        launched = [self._new_unit(manager) for _ in range(plan.launch)]
        for unit in launched:
            self._launches += 1
            self._time.call_later(manager.spec.boot_seconds, self._boot, unit)
        manager.reconciler.launched([unit.unit_id for unit in launched], plan.launch, self._now)
        if plan.launch or plan.terminate:
            self._record_timeline()

    def _record_timeline(self) -> None:
        counts = tuple((known.spec.manager_id, self._alive(known)) for known in self._managers.values())
        self._timeline.append(TimelinePoint(self._now, counts))
        self._peak = max(self._peak, sum(count for _manager_id, count in counts))

    @staticmethod
    def _alive(manager: _Manager) -> int:
        return len(manager.units) + manager.spec.initial_workers

    def _unit_infos(self, manager: _Manager) -> Iterator[UnitInfo]:
        for unit in manager.units.values():
            state = UnitState.RUNNING if unit.connected else UnitState.PENDING
            yield UnitInfo(unit.unit_id, state, unit.launched_at, (unit.peer.decode(),))

    # ------------------------------------------------------------ report

    def _report(self, end: float) -> SimulationReport:
        lifetimes = [
            ((end if unit.stopped_at is None else unit.stopped_at) - unit.launched_at, unit.manager.spec)
            for unit in self._all_units
        ]
        worker_seconds = sum(seconds for seconds, _spec in lifetimes)
        cost = sum(seconds * spec.worker_cost_per_hour for seconds, spec in lifetimes) / 3600.0
        return SimulationReport(
            policy=self._policy_name,
            worker_seconds=worker_seconds,
            latency_p50_seconds=percentile(self._latencies, 50),
            latency_p95_seconds=percentile(self._latencies, 95),
            latency_max_seconds=max(self._latencies, default=float("nan")),
            launches=self._launches,
            terminations=self._terminations,
            killed_tasks=self._killed,
            completed_tasks=len(self._latencies),
            unfinished_tasks=len(self._durations) - len(self._latencies),
            peak_workers=self._peak,
            end_seconds=end,
            timeline=tuple(self._timeline),
            warnings=tuple(self._hook.warnings_seen),
            cost=cost,
            capped_seconds=self._capped_seconds,
        )


def _hello(info: m.RoleInfo) -> m.Hello:
    return m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "sim", info)
