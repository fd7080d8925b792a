"""Outstanding work in seconds, from the run times the scheduler learned: what duration-aware scaling sizes by.

A queued task counts its function's mean run time; a running task counts what is left of it (the mean minus
how long it has run, never below 0). A function's mean is the one learned for it in the tasks' capability set;
a function without one (never finished there) counts the default: the mean of every learned run time. Tasks a
group counts but its `functions` leave out count the default too. Before any task has succeeded there is no
default and no estimate at all (None): the caller then counts tasks instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scaler.policy.snapshot import RunTime, TaskGroup
from scaler.protocol.messages import Capabilities


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

    def mean_of(self, function_name: str, capabilities: Capabilities) -> float | None:
        return self.means.get((function_name, capabilities), self.default_seconds)


def outstanding_seconds(groups: Iterable[TaskGroup], table: RunTimeTable) -> float | None:
    """Seconds of work the groups' tasks still need, one worker running one task at a time; None when no run
    time has been learned at all."""
    default = table.default_seconds
    if default is None:
        return None
    total = 0.0
    for group in groups:
        queued, running = group.queued, group.running
        for function in group.functions:
            mean = table.mean_of(function.function_name, group.capabilities)
            assert mean is not None  # the default is known
            total += function.queued * mean + sum(max(0.0, mean - elapsed) for elapsed in function.running_seconds)
            queued -= function.queued
            running -= len(function.running_seconds)
        total += (max(0, queued) + max(0, running)) * default
    return total
