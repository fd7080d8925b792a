"""What a run report shows, aggregated from the monitor feed as it arrives (pure: no I/O, no clock).

`RunRecord.on_message` takes the feed's messages (`StatusSnapshot`, `TaskTransitions`, `ScalingDecisions`) in the
order they arrived; the page (`report_page`) reads the record at the end. Whatever the length of the run, the
record stays bounded (`RecordLimits`): durations go into per-function histograms, task bars, status points,
decisions and workers into bounded samples or lists that count what they left out.

Sources: task counts per function are the scheduler's own exact counts (the last status minus the first), so a
transition the scheduler left out of the feed (`TaskTransitions.dropped`) never skews them; durations, the
timeline and peak memory come from the task transitions the feed carried; workers, managers, their boot times
and spend from the statuses; decisions from the scaling topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.monitor.run_stats import Bar, LogHistogram, StrideSample
from scaler.protocol import messages as m

#: The states of a live task; any other state is how a task ended (a ResultStatus value, or "canceled").
LIVE_STATES = frozenset({"waiting", "queued", "dispatched", "canceling"})


@dataclass(frozen=True, slots=True)
class RecordLimits:
    bars: int = 2000  #: task bars kept for the timeline
    points: int = 600  #: status points kept for the charts over time
    decisions: int = 500  #: scaling decisions kept (the first ones)
    workers: int = 2000  #: workers remembered (the first ones seen)
    functions: int = 200  #: functions with their own durations; later ones are counted under OTHER_FUNCTIONS


OTHER_FUNCTIONS = "(other functions)"


@dataclass(slots=True)
class FunctionRecord:
    durations: LogHistogram = field(default_factory=LogHistogram)
    failed_durations: int = 0  #: durations of failed runs (in `durations` too)
    peak_memory_bytes: int = 0  #: the highest peak measured (profiled tasks only)
    memory_measured: int = 0  #: runs with a peak measured


@dataclass(slots=True)
class RunWorkerRecord:
    manager_id: str
    hostname: str
    connected_at: float  #: seconds since the epoch
    seen_at_start: bool  #: connected before the run began
    capacity: int = 0
    peak_rss_bytes: int = 0


@dataclass(slots=True)
class RunManagerRecord:
    manager_type: str = ""
    worker_cost_per_hour: float = 0.0
    boot_seconds: float = 0.0
    cost: float = 0.0  #: spend integrated over the run
    unit_hours: float = 0.0
    peak_units: int = 0


@dataclass(frozen=True, slots=True)
class StatusPoint:
    wall_time: float
    queued: int
    running: int
    workers: tuple[tuple[str, int], ...]  #: connected workers per manager id ("" for workers of no manager)


class RunRecord:
    def __init__(self, limits: RecordLimits | None = None) -> None:
        self.limits = limits or RecordLimits()
        self.first_status: m.StatusSnapshot | None = None
        self.last_status: m.StatusSnapshot | None = None
        self.statuses = 0
        self.functions: dict[str, FunctionRecord] = {}
        self.bars: StrideSample[Bar] = StrideSample(self.limits.bars)
        self.points: StrideSample[StatusPoint] = StrideSample(self.limits.points)
        self.decisions: list[m.ScalingDecision] = []
        self.decisions_dropped = 0
        self.workers: dict[bytes, RunWorkerRecord] = {}
        self.workers_dropped = 0
        self.managers: dict[str, RunManagerRecord] = {}
        self.transitions_received = 0
        self.transitions_dropped = 0  #: left out of the feed by the scheduler (its rate bound)
        self.runs_received = 0  #: transitions that ended a run (the timeline's and durations' sources)

    # ------------------------------------------------------------ feeding

    def on_message(self, message: object) -> None:
        if isinstance(message, m.StatusSnapshot):
            self.on_status(message)
        elif isinstance(message, m.TaskTransitions):
            self.on_transitions(message)
        elif isinstance(message, m.ScalingDecisions):
            self.on_decisions(message)

    def on_status(self, status: m.StatusSnapshot) -> None:
        previous = self.last_status
        if self.first_status is None:
            self.first_status = status
        self.last_status = status
        self.statuses += 1
        for manager in status.managers:
            self._manager_status(manager, previous, status.time)
        for worker in status.workers:
            self._worker_status(worker, status, at_start=previous is None)
        connected: dict[str, int] = {}
        for worker in status.workers:
            connected[worker.manager_id] = connected.get(worker.manager_id, 0) + 1
        point = StatusPoint(
            status.wall_time, status.scheduler.queued, status.scheduler.running, tuple(sorted(connected.items()))
        )
        self.points.offer(point)

    def on_transitions(self, message: m.TaskTransitions) -> None:
        if self.first_status is None:
            return  # noted before the run began
        self.transitions_received += len(message.transitions)
        self.transitions_dropped += message.dropped
        for transition in message.transitions:
            # an end that names a worker came with that worker's result (docs/protocol.md, TaskTransitions)
            if transition.state not in LIVE_STATES and transition.worker_id:
                self._ran(transition)

    def on_decisions(self, message: m.ScalingDecisions) -> None:
        if self.first_status is None:
            return
        room = self.limits.decisions - len(self.decisions)
        self.decisions.extend(message.decisions[: max(0, room)])
        self.decisions_dropped += max(0, len(message.decisions) - max(0, room))

    # ------------------------------------------------------------ parts

    def _ran(self, transition: m.TaskTransition) -> None:
        self.runs_received += 1
        failed = transition.state != "success"
        function = self._function(transition.function_name)
        function.durations.add(transition.run_seconds)
        function.failed_durations += failed
        if transition.peak_memory_bytes:
            function.memory_measured += 1
            function.peak_memory_bytes = max(function.peak_memory_bytes, transition.peak_memory_bytes)
        end = transition.wall_time
        worker = worker_name(transition.worker_id)
        self.bars.offer(Bar(worker, transition.function_name, end - transition.run_seconds, end, failed))

    def _function(self, name: str) -> FunctionRecord:
        record = self.functions.get(name)
        if record is None:
            if len(self.functions) >= self.limits.functions:
                return self.functions.setdefault(OTHER_FUNCTIONS, FunctionRecord())
            record = self.functions[name] = FunctionRecord()
        return record

    def _manager_status(self, manager: m.ManagerSummary, previous: m.StatusSnapshot | None, now: float) -> None:
        record = self.managers.setdefault(manager.manager_id, RunManagerRecord())
        record.manager_type = manager.manager_type
        record.worker_cost_per_hour = manager.worker_cost_per_hour
        record.boot_seconds = manager.boot_seconds or record.boot_seconds
        record.peak_units = max(record.peak_units, paid_units(manager))
        before = _manager_in(previous, manager.manager_id)
        if previous is not None and before is not None:
            # the units the previous status showed were paid for until this one
            hours = max(0.0, now - previous.time) / 3600
            record.cost += paid_units(before) * before.worker_cost_per_hour * hours
            record.unit_hours += paid_units(before) * hours

    def _worker_status(self, worker: m.WorkerSummary, status: m.StatusSnapshot, at_start: bool) -> None:
        record = self.workers.get(worker.worker_id)
        if record is None:
            if len(self.workers) >= self.limits.workers:
                self.workers_dropped += 1
                return
            connected_at = status.wall_time - worker.connected_seconds_ago
            record = RunWorkerRecord(worker.manager_id, worker.hostname, connected_at, at_start, worker.capacity)
            self.workers[worker.worker_id] = record
        record.capacity = max(record.capacity, worker.capacity)
        record.peak_rss_bytes = max(record.peak_rss_bytes, worker.rss_bytes)

    # ------------------------------------------------------------ reading

    @property
    def started_at(self) -> float:
        return self.first_status.wall_time if self.first_status is not None else 0.0

    @property
    def ended_at(self) -> float:
        return self.last_status.wall_time if self.last_status is not None else 0.0

    def function_counts(self) -> dict[str, m.TaskCounts]:
        """Tasks per function that ended during the run (the scheduler's counts: last status minus first), and
        the ones still live at the end."""
        if self.first_status is None or self.last_status is None:
            return {}
        before = {summary.name: summary.counts for summary in self.first_status.functions}
        counts: dict[str, m.TaskCounts] = {}
        for summary in self.last_status.functions:
            old, new = before.get(summary.name, m.TaskCounts()), summary.counts
            delta = m.TaskCounts(
                new.waiting, new.queued, new.running, new.succeeded - old.succeeded, new.failed - old.failed,
                new.canceled - old.canceled,
            )  # fmt: skip
            if delta.succeeded or delta.failed or delta.canceled or delta.live:
                counts[summary.name] = delta
        return counts


def paid_units(manager: m.ManagerSummary) -> int:
    """The units a manager pays for: the ones it reports (booting ones too), and never fewer than its connected
    workers (its own count comes with its heartbeat, which can lag behind workers that already connected)."""
    return max(manager.units, manager.connected_workers)


def worker_name(worker_id: bytes) -> str:
    return worker_id.decode(errors="replace")


def _manager_in(status: m.StatusSnapshot | None, manager_id: str) -> m.ManagerSummary | None:
    if status is None:
        return None
    return next((manager for manager in status.managers if manager.manager_id == manager_id), None)
