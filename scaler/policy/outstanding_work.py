"""Outstanding work in seconds, from the run times the scheduler learned: what duration-aware scaling sizes by.

A queued task counts its function's mean run time; a running task counts what is left of it (the mean minus
how long it has run, never below 0). A function's mean is the one learned for it in the tasks' capability set.

A function without one (never finished there) is estimated. The starting point is the default: the mean of
every learned run time, or `UNKNOWN_TASK_SECONDS` before anything has finished at all (Dask's figure for a
task it knows nothing of). Its tasks that have been running for x seconds say it takes at least that long, and
likely about as long again, so the estimate is at least twice the longest such x: a first burst of tasks that
turn out long grows the pool as they run, instead of waiting for one to finish. Tasks a group counts but its
`functions` leave out count the default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scaler.policy.snapshot import RunTime, TaskGroup
from scaler.protocol.messages import Capabilities

#: What a task of a function never seen finish is assumed to take, before any task at all has finished.
UNKNOWN_TASK_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class RunTimeTable:
    """The snapshot's learned run times, looked up by (function name, capability set)."""

    means: Mapping[tuple[str, Capabilities], float]
    default_seconds: float | None  #: the mean of every learned run time; None when nothing is learned

    @classmethod
    def of(cls, run_times: Iterable[RunTime]) -> RunTimeTable:
        means = {(run_time.function_name, run_time.capabilities): run_time.mean_seconds for run_time in run_times}
        default = sum(means.values()) / len(means) if means else None
        return cls(means, default)

    @property
    def is_empty(self) -> bool:
        """Nothing learned yet: every function is estimated from `UNKNOWN_TASK_SECONDS` and its running tasks."""
        return self.default_seconds is None

    def mean_of(self, function_name: str, capabilities: Capabilities) -> float | None:
        return self.means.get((function_name, capabilities), self.default_seconds)


def outstanding_seconds(groups: Iterable[TaskGroup], table: RunTimeTable) -> float:
    """Seconds of work the groups' tasks still need, one worker running one task at a time."""
    default = UNKNOWN_TASK_SECONDS if table.default_seconds is None else table.default_seconds
    total = 0.0
    for group in groups:
        queued, running = group.queued, group.running
        for function in group.functions:
            mean = table.means.get((function.function_name, group.capabilities))
            if mean is None:  # never seen finish here: at least twice what its longest running task has run
                mean = max(default, 2.0 * max(function.running_seconds, default=0.0))
            total += function.queued * mean + sum(max(0.0, mean - elapsed) for elapsed in function.running_seconds)
            queued -= function.queued
            running -= len(function.running_seconds)
        total += (max(0, queued) + max(0, running)) * default
    return total
