"""What the Python values of the scheduler protocol add to its schema (messages.py re-exports all of it): the
capability set and worker limit as Python holds them, the scheduler's in-process read-model values that never
travel, and properties computed from a message's fields. Hand-written; it imports nothing generated."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Capabilities",
    "ClientLoad",
    "FunctionLoad",
    "ManagerSummaryMethods",
    "RunTimeEstimate",
    "TaskCountsMethods",
    "UnitWaitsMethods",
    "WorkerLimit",
    "make_capabilities",
]

#: A capability set, normalised: sorted by name. Value -1 means "present, no quantity".
Capabilities = tuple[tuple[str, int], ...]

#: Worker limit of a manager: None means unlimited.
WorkerLimit = int | None


def make_capabilities(values: dict[str, int] | None) -> Capabilities:
    if not values:
        return ()
    return tuple(sorted((str(name), int(value)) for name, value in values.items()))


@dataclass(frozen=True, slots=True)
class FunctionLoad:
    """One function's live tasks within a capability set (in-process read model; not on the monitor feed)."""

    function_name: str
    queued: int = 0
    #: how long each of its running tasks has held its worker, in seconds
    running_seconds: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class RunTimeEstimate:
    """What the scheduler has learned of a function's run time in one capability set (the dispatcher's queue
    key), from its successful tasks (in-process read model; not on the monitor feed)."""

    function_name: str
    capabilities: Capabilities
    mean_seconds: float  #: exponentially weighted mean of its run times


@dataclass(frozen=True, slots=True)
class ClientLoad:
    """A client's work as the scaling policies weigh it (in-process read model; not on the monitor feed)."""

    client_id: bytes
    share: float  #: its weight against other clients'
    running: int  #: its tasks at workers
    #: its queued tasks that could start now (its quotas' held back left out), per capability set
    queued: tuple[tuple[Capabilities, int], ...] = ()
    max_cost_per_hour: float = 0.0  #: its key's part of the cost policy's budget (0: a part by its share)


class TaskCountsMethods:
    """Base of TaskCounts."""

    __slots__ = ()
    waiting: int
    queued: int
    running: int

    @property
    def live(self) -> int:
        return self.waiting + self.queued + self.running


class ManagerSummaryMethods:
    """Base of ManagerSummary."""

    __slots__ = ()
    units: int
    worker_cost_per_hour: float
    min_workers: int
    buffer_workers: int

    @property
    def spend_per_hour(self) -> float:
        """What its units cost now (booting ones are paid for too), per hour."""
        return self.units * self.worker_cost_per_hour

    @property
    def warm_spend_per_hour(self) -> float:
        """What its warm capacity (min_workers, or buffer_workers when more) costs per hour when idle."""
        return max(self.min_workers, self.buffer_workers) * self.worker_cost_per_hour


class UnitWaitsMethods:
    """Base of UnitWaits."""

    __slots__ = ()
    reason: str
    units: int
    message: str

    @property
    def described(self) -> str:
        """`2 Resources (the provider's words)`."""
        words = f" ({self.message})" if self.message and self.message != self.reason else ""
        return f"{self.units} {self.reason}{words}"


def describe_waits(waits: tuple[UnitWaitsMethods, ...]) -> str:
    """`3 unit(s) wait in the provider's queue: 2 Resources (...), 1 Priority` for logs, the monitor feed's scaling
    decisions and the screens; "" when none waits."""
    if not waits:
        return ""
    total = sum(wait.units for wait in waits)
    return f"{total} unit(s) wait in the provider's queue: {', '.join(wait.described for wait in waits)}"
