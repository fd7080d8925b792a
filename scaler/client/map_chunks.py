"""Shipping a large `map` in chunks: one task runs several calls and returns their results as a list.

Every task costs a few hundred microseconds of messaging across the client, scheduler, worker and
processor; a call of a tiny function costs a few. So a big map goes out as tasks of several calls
each, while staying split finely enough to use every worker the cluster has or may grow to: at least
8 chunks per worker and never fewer than 64 chunks, so a small map (up to a few hundred items) still
travels one call per task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: Most calls in one task.
MAX_CHUNK = 512
#: Chunks wanted per worker, and the fewest workers assumed (for elastic clusters that start small).
CHUNKS_PER_WORKER = 8
MIN_WORKERS_ASSUMED = 8


def chunk_size(items: int, workers: int) -> int:
    parallelism = CHUNKS_PER_WORKER * max(workers, MIN_WORKERS_ASSUMED)
    return max(1, min(MAX_CHUNK, items // parallelism))


def run_chunk(function: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Runs on a worker: the calls of one chunk, in order; the first exception ends the chunk."""
    return [function(*arguments) for arguments in calls]
