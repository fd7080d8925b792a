"""Shipping a large `map` in chunks: one task runs several calls and returns their results as a list.

Every task costs a few hundred microseconds of messaging across the client, scheduler, worker and
processor; a call of a tiny function costs a few. So a big map goes out as tasks of several calls
each, while staying split finely enough to use every worker the cluster has or may grow to: at least
8 chunks per worker and never fewer than 64 chunks, so a small map (up to a few hundred items) still
travels one call per task.
"""

from __future__ import annotations

import inspect
import reprlib
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


def chunk_size_lookahead(workers: int) -> int:
    """How many items of a map of unknown length to read before its chunk size is known: a map longer than this
    has the largest chunks whatever its length."""
    return MAX_CHUNK * CHUNKS_PER_WORKER * max(workers, MIN_WORKERS_ASSUMED)


#: Set on the exception a chunk's call raised: the call's index within its chunk (travels with the exception).
CHUNK_INDEX_ATTRIBUTE = "scaler_map_chunk_index"


def run_chunk(function: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Runs on a worker: the calls of one chunk, in order; the first exception ends the chunk."""
    results = []
    for index, arguments in enumerate(calls):
        try:
            value = function(*arguments)
            results.append(list(value) if inspect.isgenerator(value) else value)  # a generator's values, as submit
        except Exception as error:
            try:
                setattr(error, CHUNK_INDEX_ATTRIBUTE, index)
            except (AttributeError, TypeError):  # an exception type that takes no attributes
                pass
            raise
    return results


def name_failed_item(
    error: BaseException, first_item: int, items: int, calls: Sequence[tuple[Any, ...]], calls_from: int = 0
) -> None:
    """Add a note to a map's failure naming the item that raised (index and arguments), or the items of
    the task that failed as a whole (its worker died, it timed out). `calls[0]` is map item `calls_from`."""
    offset = getattr(error, CHUNK_INDEX_ATTRIBUTE, None)
    if offset is None and items > 1:
        note = f"scaler: map items {first_item} to {first_item + items - 1} (one task) failed"
    else:
        index = first_item + (offset or 0)
        shown = reprlib.repr(calls[index - calls_from]) if 0 <= index - calls_from < len(calls) else "?"
        note = f"scaler: map item {index} failed; its arguments: {shown}"
    notes = getattr(error, "__notes__", None)
    if notes is not None and note in notes:
        return
    if hasattr(error, "add_note"):
        error.add_note(note)
    else:  # Python 3.10: kept for code that reads it, not printed by tracebacks
        error.__notes__ = [*(notes or []), note]  # type: ignore[attr-defined]
