"""How long tasks take on this worker, learned from those that finished here (pure): the prefetch, from the run
time of every task, and how deep tiny tasks are staged, from the run time of each function."""

from __future__ import annotations

import math

#: Queued work the prefetch aims to hold, in seconds of measured task time.
PREFETCH_HORIZON_SECONDS = 0.005
MAX_PREFETCH = 64
#: The prefetch follows the measured run time when the two differ by more than this factor.
PREFETCH_STEP = 2
#: Work staged in a computing processor, in seconds of measured task time (agent/placement.py): tasks longer than this
#: are not staged, and a task waits behind staged ones at most about this long.
STAGING_HORIZON_SECONDS = 0.002
#: Functions whose run time is kept for staging, at most (all are forgotten when a new one would pass it).
MAX_KNOWN_FUNCTIONS = 1024


class RunTimeEstimates:
    """Moving averages of task run times: of every task, and per function name."""

    def __init__(self) -> None:
        self._average: float | None = None  #: of every task: the prefetch
        self._by_function: dict[str, float] = {}  #: staging
        self._prefetch = 1

    def learn(self, function_name: str, seconds: float) -> None:
        """A task of `function_name` finished here after computing `seconds`."""
        self._average = average = _moving_average(self._average, seconds)
        known = self._by_function.get(function_name)
        if known is None and len(self._by_function) >= MAX_KNOWN_FUNCTIONS:
            self._by_function.clear()
        self._by_function[function_name] = _moving_average(known, seconds)
        wanted = max(1, min(MAX_PREFETCH, math.ceil(PREFETCH_HORIZON_SECONDS / max(average, 1e-6))))
        if wanted > PREFETCH_STEP * self._prefetch or wanted * PREFETCH_STEP < self._prefetch:
            self._prefetch = wanted

    def prefetch(self) -> int:
        """Tasks to hold beyond the slots: enough to hide a round trip to the scheduler for tiny tasks, one for long
        ones (and before any finished). It follows the average run time only when that moved it by more than
        PREFETCH_STEP, so that the capacity the scheduler is told (WorkerCapacity, a message each time) does not
        change with every task of a run time that varies."""
        return self._prefetch

    def staging_depth(self, function_name: str, max_staged_tasks: int) -> int:
        """How many staged tasks a processor may hold when a task of `function_name` is the next to stage (at most
        `max_staged_tasks`): none for a function not seen finishing here, or slower than the horizon."""
        seconds = self._by_function.get(function_name)
        if seconds is None:
            return 0
        return min(max_staged_tasks, int(STAGING_HORIZON_SECONDS / max(seconds, 1e-6)))


def _moving_average(average: float | None, seconds: float) -> float:
    return seconds if average is None else 0.8 * average + 0.2 * seconds
