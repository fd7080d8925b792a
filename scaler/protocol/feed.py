"""The monitor feed's values: the scheduler's read model (`SchedulerView`), task transitions and scaling
decisions, each published on its own topic inside a versioned envelope (`FeedMessage`).

`SchedulerView` is the one frozen view of the scheduler core: the core builds it once per instant when
someone needs it, and the scaling policy, the periodic status, `scaler_top`, the dashboard and the
metrics all read it. Times are seconds; `now` is the scheduler's monotonic clock (only differences
mean something), every `wall_time` is Unix time. `feed_codec` maps these values to bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from scaler.protocol.messages import Capabilities, TargetEntry, WorkerLimit, WorkerStatus

#: Bumped whenever a reader of the previous version could misread the feed.
FEED_VERSION = 1


class FeedTopic(enum.Enum):
    """The first frame of every feed message; subscribers filter on it (ZeroMQ prefix match)."""

    STATUS = "status"  #: a `SchedulerView`, every status interval
    TRANSITIONS = "transitions"  #: a `TransitionBatch`, every tick that had transitions
    DECISIONS = "decisions"  #: a `ScalingDecision`, as soon as it is made


class TaskStatus(enum.Enum):
    """Where a task is; the last four are endings (the task has left the scheduler)."""

    WAITING = "waiting"  #: a graph node waiting for its dependencies
    QUEUED = "queued"  #: ready, no worker yet (the reference's "unassigned")
    RUNNING = "running"  #: dispatched to a worker (running there, or prefetched)
    CANCELING = "canceling"  #: a cancel was sent to its worker
    SUCCESS = "success"
    FAILED = "failed"
    CANCELED = "canceled"
    WORKER_DIED = "worker_died"  #: failed after its workers died more often than the retry budget


ENDINGS = frozenset({TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.CANCELED, TaskStatus.WORKER_DIED})


@dataclass(frozen=True, slots=True)
class TaskCounts:
    """Live tasks by state, and tasks ended since the scheduler (or the client) started, by ending."""

    waiting: int = 0
    queued: int = 0
    running: int = 0
    canceling: int = 0
    success: int = 0
    failed: int = 0
    canceled: int = 0
    worker_died: int = 0
    not_found: int = 0  #: cancels of tasks the scheduler did not know (already ended, or never seen)

    @property
    def live(self) -> int:
        return self.waiting + self.queued + self.running + self.canceling

    @property
    def ended(self) -> int:
        return self.success + self.failed + self.canceled + self.worker_died


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """The scheduler process and what only its shell can measure."""

    address: str = ""
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    object_count: int = 0  #: in object storage, refreshed about every second
    object_bytes: int = 0
    messages_sent: tuple[tuple[str, int], ...] = ()  #: (message type, count since start), by type name
    messages_received: tuple[tuple[str, int], ...] = ()
    graphs: int = 0  #: live task graphs


@dataclass(frozen=True, slots=True)
class TaskGroupEntry:
    """The scheduler's tasks that need one capability set (one group for all under `allocate=even_load`)."""

    capabilities: Capabilities
    queued: int
    running: int
    oldest_queued_seconds: float = 0.0  #: age of the next task to dispatch; 0 when none is queued
    reason: str = ""  #: why queued tasks wait; "" when none is queued


@dataclass(frozen=True, slots=True)
class WorkerEntry:
    worker_id: bytes
    hostname: str = ""
    pid: int = 0
    manager_id: str = ""  #: the manager that started it; "" when none
    capabilities: Capabilities = ()
    capacity: int = 1  #: tasks it accepts at once (its credit)
    assigned: int = 0  #: tasks the scheduler sent it and has not seen end ("sent" in scaler_top)
    #: from its last heartbeat: tasks queued there, its processors' cpu/rss
    status: WorkerStatus = field(default_factory=WorkerStatus)
    cpu_percent: float = 0.0  #: its agent process
    rss_bytes: int = 0
    lag_seconds: float = 0.0  #: heartbeat round trip
    last_seen_seconds: float = 0.0  #: since its last message
    connected_seconds: float = 0.0  #: since its hello

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.assigned)

    @property
    def queued(self) -> int:
        return self.status.queued


@dataclass(frozen=True, slots=True)
class ManagerEntry:
    manager_id: str
    manager_type: str = ""
    capabilities: Capabilities = ()
    max_workers: WorkerLimit = None
    target: tuple[TargetEntry, ...] | None = None  #: the last target sent; None before the first
    units: int = 0  #: from its last heartbeat
    pending_units: int = 0  #: of those, not running yet (booting)
    connected_workers: int = 0
    seconds_since_heartbeat: float = 0.0

    @property
    def target_workers(self) -> int:
        return sum(entry.workers for entry in self.target or ())


@dataclass(frozen=True, slots=True)
class ClientEntry:
    client_id: bytes
    name: str = ""
    hostname: str = ""
    pid: int = 0
    tasks: TaskCounts = TaskCounts()  #: since it connected


@dataclass(frozen=True, slots=True)
class FunctionEntry:
    function_name: str
    tasks: TaskCounts = TaskCounts()  #: since the scheduler started


@dataclass(frozen=True, slots=True)
class ScalingDecision:
    """A change of a manager's target, with the policy's reason."""

    wall_time: float
    manager_id: str
    policy: str
    workers_before: int  #: the previous target (the connected workers before the first one)
    workers_after: int
    reason: str = ""

    @property
    def text(self) -> str:
        """The decision in words, e.g. `manager ecs-1: 3 -> 8 workers: 412 tasks queued, work policy`."""
        change = f"manager {self.manager_id}: {self.workers_before} -> {self.workers_after} workers"
        because = f": {self.reason}" if self.reason else ""
        return f"{change}{because}, {self.policy} policy"


@dataclass(frozen=True, slots=True)
class SchedulerView:
    """Everything the scheduler core shows the outside, frozen at one instant."""

    now: float  #: the core's monotonic clock
    wall_time: float
    scheduler: SchedulerStats = SchedulerStats()
    tasks: TaskCounts = TaskCounts()
    groups: tuple[TaskGroupEntry, ...] = ()  #: one per capability set with live tasks, in queue order
    workers: tuple[WorkerEntry, ...] = ()  #: in join order
    managers: tuple[ManagerEntry, ...] = ()
    clients: tuple[ClientEntry, ...] = ()
    functions: tuple[FunctionEntry, ...] = ()
    decisions: tuple[ScalingDecision, ...] = ()  #: the latest few, oldest first
    manager_timeout_seconds: float = 10.0  #: a manager silent this long is offline

    @property
    def pending(self) -> tuple[TaskGroupEntry, ...]:
        """Groups with queued tasks, each with the reason they wait."""
        return tuple(group for group in self.groups if group.queued)


@dataclass(frozen=True, slots=True)
class TaskTransition:
    task_id: bytes
    status: TaskStatus  #: the state entered
    worker_id: bytes  #: the worker holding the task (or that held it, for an ending); b"" for none
    wall_time: float


@dataclass(frozen=True, slots=True)
class TransitionBatch:
    """Transitions since the previous batch, oldest first; at most the scheduler's per-batch limit."""

    transitions: tuple[TaskTransition, ...] = ()
    dropped: int = 0  #: transitions over the limit since the previous batch, not sent


FeedBody = SchedulerView | TransitionBatch | ScalingDecision

TOPIC_OF_BODY: dict[type, FeedTopic] = {
    SchedulerView: FeedTopic.STATUS,
    TransitionBatch: FeedTopic.TRANSITIONS,
    ScalingDecision: FeedTopic.DECISIONS,
}


@dataclass(frozen=True, slots=True)
class FeedMessage:
    version: int
    wall_time: float  #: when the scheduler published it
    body: FeedBody

    @property
    def topic(self) -> FeedTopic:
        return TOPIC_OF_BODY[type(self.body)]
