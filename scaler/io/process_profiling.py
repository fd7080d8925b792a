"""Opt-in cProfile of a whole component process, for performance work.

With `SCALER_PROFILE_DIR=/some/dir` in the environment, the scheduler, worker agents and processors
write `<component>-<pid>.prof` there when they exit (read with `python -m pstats`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

ENVIRONMENT_VARIABLE = "SCALER_PROFILE_DIR"


def run_profiled(component: str, function: Callable[[], T]) -> T:
    directory = os.environ.get(ENVIRONMENT_VARIABLE)
    if not directory:
        return function()
    import cProfile
    import time

    profiler = cProfile.Profile(time.process_time)  # CPU time: waiting for other processes is not cost
    try:
        return profiler.runcall(function)
    finally:
        profiler.dump_stats(os.path.join(directory, f"{component}-{os.getpid()}.prof"))
