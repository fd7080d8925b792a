"""Opt-in cProfile of a whole component process, for performance work.

With `SCALER_PROFILE_DIR=/some/dir` in the environment, the scheduler, worker agents and processors
write `<component>-<pid>.prof` there when they exit (read with `python -m pstats`).

With `SCALER_TRACEMALLOC_DIRECTORY=/some/dir`, worker agents and processors trace their Python allocations and
write `<component>-<pid>-<n>.tracemalloc` snapshots there every `SCALER_TRACEMALLOC_SECONDS` (default 30), to find
what holds memory that grows (compare two with `benchmarks/worker_memory.py --diff DIR`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

ENVIRONMENT_VARIABLE = "SCALER_PROFILE_DIR"
TRACEMALLOC_DIRECTORY = "SCALER_TRACEMALLOC_DIRECTORY"
TRACEMALLOC_SECONDS = "SCALER_TRACEMALLOC_SECONDS"


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


def trace_memory_if_asked(component: str) -> None:
    """Start tracing allocations and a thread that snapshots them, when the environment asks for it."""
    directory = os.environ.get(TRACEMALLOC_DIRECTORY)
    if not directory:
        return
    import threading
    import time
    import tracemalloc

    interval = float(os.environ.get(TRACEMALLOC_SECONDS, "30"))
    tracemalloc.start(4)

    def snapshots() -> None:
        number = 0
        while True:
            time.sleep(interval)
            path = os.path.join(directory, f"{component}-{os.getpid()}-{number:04d}.tracemalloc")
            tracemalloc.take_snapshot().dump(path)
            number += 1

    threading.Thread(target=snapshots, name="tracemalloc-snapshots", daemon=True).start()
