"""The frozen view of the cluster a scaling policy decides from.

The scheduler derives one `ScalingSnapshot` per decision from its read model (`scaling_snapshot` of a
`StatusSnapshot`); tests build them by hand. A policy never sees anything else: no registries, no clock,
no sockets.

Invariants:
- a worker belongs to the manager named by its `manager_id` (the only place the grouping lives);
  `""` means the worker was started by hand and no manager owns it;
- `now` and every `*_since` value are on the same monotonic clock, in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from scaler.protocol.messages import Capabilities, ManagerTarget, StatusSnapshot, WorkerLimit

#: The scheduler forgets a manager that has been silent this long (reference: 10 s, hard-coded).
DEFAULT_MANAGER_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class FunctionTasks:
    """One function's share of a `TaskGroup`."""

    function_name: str
    queued: int = 0
    #: how long each of its running tasks has been running (0 for one its worker holds but has not started)
    running_seconds: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskGroup:
    """The scheduler's tasks that require one capability set."""

    capabilities: Capabilities  #: what the tasks require, as submitted (sorted)
    queued: int  #: waiting for a worker
    running: int  #: assigned to a worker (running or prefetched there)
    oldest_queued_seconds: float = 0.0  #: age of the oldest queued task; 0 when none is queued
    #: the same tasks by function; may be empty, or cover only part of the counts (the rest: functions unknown)
    functions: tuple[FunctionTasks, ...] = ()

    @property
    def tasks(self) -> int:
        return self.queued + self.running


def fewer_queued(group: TaskGroup, queued: int) -> TaskGroup:
    """The group with only `queued` of its queued tasks (0 <= queued <= group.queued), each function's share cut in
    proportion (largest remainders), so that the duration policies, which read the functions, count them too."""
    if queued >= group.queued:
        return group
    known = sum(function.queued for function in group.functions)
    keep = min(known, queued * known // group.queued) if group.queued else 0
    exact = [function.queued * keep / known if known else 0.0 for function in group.functions]
    counts = [int(value) for value in exact]
    by_remainder = sorted(range(len(counts)), key=lambda index: counts[index] - exact[index])
    for index in by_remainder[: keep - sum(counts)]:
        counts[index] += 1
    functions = tuple(replace(function, queued=count) for function, count in zip(group.functions, counts, strict=True))
    return replace(group, queued=queued, functions=functions)


@dataclass(frozen=True, slots=True)
class ClientWork:
    """A client's work, as the cost policy splits its budget (`policy/scaling/budget_split.py`)."""

    client_id: str
    share: float = 1.0  #: its weight against other clients'
    running: int = 0  #: its tasks at workers
    queued: tuple[tuple[Capabilities, int], ...] = ()  #: its queued tasks that could start now, per capability set
    max_cost_per_hour: float = 0.0  #: its key's part of the budget (0: a part by its share)

    @property
    def tasks(self) -> int:
        return self.running + sum(count for _, count in self.queued)


@dataclass(frozen=True, slots=True)
class RunTime:
    """The learned run time of a function's tasks in one capability set."""

    function_name: str
    capabilities: Capabilities  #: the set as the scheduler queues it (`()` when it ignores capabilities)
    mean_seconds: float


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A connected worker, as far as scaling is concerned."""

    worker_id: str
    manager_id: str  #: the manager that started it; "" when no manager owns it
    capabilities: Capabilities = ()
    capacity: int = 1  #: task slots (running plus prefetch)
    assigned: int = 0  #: tasks the scheduler has given it and not yet seen finish
    connected_since: float = 0.0

    @property
    def is_busy(self) -> bool:
        return self.assigned > 0


@dataclass(frozen=True, slots=True)
class ManagerView:
    """A worker manager the scheduler has heard from."""

    manager_id: str
    capabilities: Capabilities = ()  #: what each of its workers advertises
    max_workers: WorkerLimit = None  #: None = unlimited
    last_target: ManagerTarget | None = None  #: the last target sent to it; None before the first
    seconds_since_heartbeat: float = 0.0
    worker_cost_per_hour: float = 0.0  #: what one of its workers costs (0: free or unknown)
    boot_seconds: float = 0.0  #: from a launch to a connected worker, declared or measured (0: unknown)


@dataclass(frozen=True, slots=True)
class ScalingSnapshot:
    """Everything a scaling policy may look at, frozen at one instant."""

    now: float
    task_groups: tuple[TaskGroup, ...] = ()  #: one per capability set with tasks, in the scheduler's order
    workers: tuple[WorkerView, ...] = ()
    managers: tuple[ManagerView, ...] = ()
    manager_timeout_seconds: float = DEFAULT_MANAGER_TIMEOUT_SECONDS
    #: what the scheduler learned of run times from finished tasks; empty before any task succeeded
    run_times: tuple[RunTime, ...] = ()
    #: each client with work (may be empty: then no budget is split per client)
    clients: tuple[ClientWork, ...] = ()

    #: manager id -> its workers; derived from `workers` so the grouping has one source of truth
    _workers_by_manager: Mapping[str, tuple[WorkerView, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        grouped: dict[str, list[WorkerView]] = {}
        for worker in self.workers:
            grouped.setdefault(worker.manager_id, []).append(worker)
        object.__setattr__(self, "_workers_by_manager", {key: tuple(value) for key, value in grouped.items()})

    @property
    def total_tasks(self) -> int:
        return sum(group.tasks for group in self.task_groups)

    def workers_of(self, manager_id: str) -> tuple[WorkerView, ...]:
        return self._workers_by_manager.get(manager_id, ())

    def is_online(self, manager: ManagerView) -> bool:
        return manager.seconds_since_heartbeat <= self.manager_timeout_seconds

    def online_managers(self) -> tuple[ManagerView, ...]:
        return tuple(manager for manager in self.managers if self.is_online(manager))


def scaling_snapshot(status: StatusSnapshot, manager_timeout_seconds: float) -> ScalingSnapshot:
    """What a policy sees of the scheduler's read model (`StatusSnapshot`)."""
    now = status.time
    return ScalingSnapshot(
        now=now,
        task_groups=tuple(
            fewer_queued(  # more workers would not start those its quota holds back
                TaskGroup(
                    group.capabilities,
                    group.count,
                    group.running,
                    group.oldest_queued_seconds,
                    tuple(FunctionTasks(f.function_name, f.queued, f.running_seconds) for f in group.functions),
                ),
                group.count - group.over_quota,
            )
            for group in status.pending
        ),
        workers=tuple(
            WorkerView(
                worker_id=worker.worker_id.decode(errors="replace"),
                manager_id=worker.manager_id,
                capabilities=worker.capabilities,
                capacity=worker.capacity,
                assigned=worker.assigned,
                connected_since=now - worker.connected_seconds_ago,
            )
            for worker in status.workers
        ),
        managers=tuple(
            ManagerView(
                manager.manager_id,
                manager.capabilities,
                manager.max_workers,
                manager.last_target,
                manager.seconds_since_heartbeat,
                manager.worker_cost_per_hour,
                manager.boot_seconds,
            )
            for manager in status.managers
        ),
        manager_timeout_seconds=manager_timeout_seconds,
        run_times=tuple(
            RunTime(estimate.function_name, estimate.capabilities, estimate.mean_seconds)
            for estimate in status.run_times
        ),
        clients=tuple(
            ClientWork(
                load.client_id.decode(errors="replace"), load.share, load.running, load.queued, load.max_cost_per_hour
            )
            for load in status.client_loads
        ),
    )
