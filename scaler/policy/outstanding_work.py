"""Outstanding work in seconds, from the run times the scheduler learned: what duration-aware scaling sizes by.

A queued task counts its function's mean run time; a running task counts what is left of it (the mean minus
how long it has run, never below 0). A function's mean is the one learned for it in the tasks' capability set.

A function without one (never finished there) is estimated. The starting point is the default: the mean of
every learned run time, or `UNKNOWN_TASK_SECONDS` before anything has finished at all (Dask's figure for a
task it knows nothing of). Its tasks that have been running for x seconds say it takes at least that long, and
likely about as long again, so the estimate is at least twice the longest such x: a first burst of tasks that
turn out long grows the pool as they run, instead of waiting for one to finish. Tasks a group counts but its
`functions` leave out count the default.

A learned mean can be out of date: the function's inputs grew, and its tasks now run five times longer. The
mean follows only as those tasks finish (`scaler.scheduler.core.run_times`), so for the first of them the queue
behind would be sized from the old mean. A running task is information before it finishes: one that has run x
seconds takes at least x (a censored observation). So when at least `STALE_MIN_TASKS` of a function's tasks
have started and every one of them has run longer than `STALE_FACTOR` times its learned mean, the mean is out of
date, and the function is estimated as one never seen is: at least `STALE_FACTOR` times the mean of what those
tasks have run. One slow task among quick ones, or a task just started among slow ones, leaves the mean as
learned.

Invariants:
- the estimate of a function is never below its learned mean, nor below the default when nothing is learned;
- a running task counts what is left of its function's estimate, never less than 0 seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scaler.policy.snapshot import RunTime, TaskGroup
from scaler.protocol.messages import Capabilities

#: What a task of a function never seen finish is assumed to take, before any task at all has finished.
UNKNOWN_TASK_SECONDS = 0.5
#: A learned mean is out of date once every started task of the function has run this many times it; the
#: estimate is then this many times what they have run on average (as for a function never seen: it has run
#: x seconds, and likely takes about as long again). Twice: a spread of run times around their mean, or an
#: estimate learned from a few quick runs, rarely puts every running task past it.
STALE_FACTOR = 2.0
#: ... and at least this many tasks have started: one long task is an outlier, not a new level. Two, not more:
#: a burst of long tasks often starts on the one or two workers the quick ones kept.
STALE_MIN_TASKS = 2


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


def outstanding_seconds(groups: Iterable[TaskGroup], table: RunTimeTable) -> float:
    """Seconds of work the groups' tasks still need, one worker running one task at a time."""
    default = UNKNOWN_TASK_SECONDS if table.default_seconds is None else table.default_seconds
    total = 0.0
    for group in groups:
        queued, running = group.queued, group.running
        for function in group.functions:
            mean = table.means.get((function.function_name, group.capabilities))
            if mean is not None:
                mean = max(mean, outrun_mean(mean, function.running_seconds))
            if mean is None:  # never seen finish here: at least twice what its longest running task has run
                mean = max(default, 2.0 * max(function.running_seconds, default=0.0))
            total += function.queued * mean + sum(max(0.0, mean - elapsed) for elapsed in function.running_seconds)
            queued -= function.queued
            running -= len(function.running_seconds)
        total += (max(0, queued) + max(0, running)) * default
    return total


def outrun_mean(mean: float, running_seconds: Iterable[float]) -> float:
    """The estimate its running tasks give a function whose learned mean is `mean`: `STALE_FACTOR` times what its
    started tasks have run on average when there are at least `STALE_MIN_TASKS` of them and each has run longer
    than `STALE_FACTOR` x `mean` (the mean is out of date); else 0 (they say nothing against it). A task its
    worker holds but has not started (0 s) is not counted."""
    started = [elapsed for elapsed in running_seconds if elapsed > 0.0]
    if len(started) < STALE_MIN_TASKS or min(started) <= STALE_FACTOR * mean:
        return 0.0
    return STALE_FACTOR * sum(started) / len(started)
