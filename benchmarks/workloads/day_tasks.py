"""Task functions of the workloads shaped like users' days (days.py), importable by the workers of every system
(main.py puts this directory on PYTHONPATH). Each returns its result with the CPU seconds of its own body, measured
with `time.thread_time()`: the executing thread's CPU only, so a worker's other threads (its event loop, heartbeats)
are not counted as task CPU. numpy and pandas are imported lazily: the module must import without them too.
"""

import time
import zlib
from typing import Any

#: Monte Carlo: each task reads this many consecutive elements of the shared array (about 2 ms of numpy).
WINDOW = 250_000


def window_start(seed: int, n_elements: int) -> int:
    return (seed * 7_919) % (n_elements - WINDOW)


def monte_carlo_body(array: Any, seed: int) -> float:
    """Deterministic: the same array and seed give the same float on every system (no random generator)."""
    import numpy

    start = window_start(seed, len(array))
    window = array[start : start + WINDOW]
    return float(numpy.sqrt(window * window + 1.0).sum())


def monte_carlo(array: Any, seed: int) -> tuple[float, float]:
    began = time.thread_time()
    value = monte_carlo_body(array, seed)
    return value, time.thread_time() - began


def make_partition(index: int, rows: int) -> tuple[Any, float]:
    """A pandas partition of `rows` rows: 100 integer keys and two integer columns, from the index alone."""
    began = time.thread_time()
    import numpy
    import pandas

    positions = numpy.arange(rows, dtype=numpy.int64) + index * rows
    frame = pandas.DataFrame({"key": positions % 100, "a": positions % 1_009, "b": (positions * 31) % 997})
    return frame, time.thread_time() - began


def group_partition(made: tuple[Any, float]) -> tuple[Any, float]:
    """Per-key sums and counts of one partition; carries the CPU of the task that made it along."""
    began = time.thread_time()
    frame, made_cpu = made
    grouped = frame.groupby("key").agg(a_sum=("a", "sum"), b_sum=("b", "sum"), rows=("a", "size"))
    return grouped, made_cpu + time.thread_time() - began


def combine_groups(*partials: tuple[Any, float]) -> tuple[Any, float]:
    """The sum of the per-key partial aggregates; the CPU of every task upstream, summed."""
    began = time.thread_time()
    import pandas

    total = pandas.concat([frame for frame, _ in partials]).groupby(level=0).sum()
    upstream = sum(cpu for _, cpu in partials)
    return total, upstream + time.thread_time() - began


def checksum(data: bytes) -> tuple[int, float]:
    began = time.thread_time()
    value = zlib.crc32(data)
    return value, time.thread_time() - began
