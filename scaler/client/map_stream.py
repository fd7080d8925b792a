"""A large `map` streamed: its chunks go out as the results of earlier ones come back, never all at once.

The client reads the map's arguments lazily, one chunk at a time, and keeps at most `chunks_in_flight` chunks
submitted and unanswered. So a 1,000,000-item map holds the arguments of those chunks only (and, for each, the
task's frame it would resubmit to a restarted scheduler), not a million argument tuples: what stays is the
result list the caller asked for. Results come back in order; the first failure cancels the chunks in flight,
submits no more, and is raised naming the map item (as `map_chunks.name_failed_item` does).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from scaler.client.future import ScalerFuture
from scaler.client.map_chunks import CHUNKS_PER_WORKER, name_failed_item

#: The fewest chunks kept in flight (enough for a cluster that grows while the map runs).
MIN_CHUNKS_IN_FLIGHT = 128

Chunk = list[tuple[Any, ...]]


class ChunkSubmitter(Protocol):
    def __call__(self, chunks: list[Chunk], first: bool) -> list[ScalerFuture]:
        """Submit the chunks as tasks (`first`: the map's first submission); their futures, in order."""
        ...


def chunks_in_flight(workers: int) -> int:
    """How many chunks a map keeps submitted: twice what the chunk size was planned for, at least 128."""
    return max(MIN_CHUNKS_IN_FLIGHT, 2 * CHUNKS_PER_WORKER * workers)


def stream_map(
    calls: Iterator[tuple[Any, ...]],
    chunk_size: int,
    window: int,
    submit: ChunkSubmitter,
    cancel: Callable[[ScalerFuture], None],
    on_chunk_done: Callable[[int], None] = lambda _items: None,
    taken_next: Callable[[list[ScalerFuture]], None] = lambda _futures: None,
) -> list[Any]:
    """The results of every call, in order; at most `window` chunks of `chunk_size` calls in flight. `taken_next` is
    told which futures are taken next, before each is (their results may be read ahead: read_ahead.py)."""
    in_flight: deque[tuple[ScalerFuture, Chunk]] = deque()
    results: list[Any] = []
    first_item, is_first = 0, True
    try:
        while True:
            fresh = _next_chunks(calls, chunk_size, window - len(in_flight))
            if fresh:
                in_flight.extend(zip(submit(fresh, is_first), fresh, strict=True))
                is_first = False
            if not in_flight:
                return results
            taken_next([future for future, _ in in_flight])
            future, chunk = in_flight.popleft()
            try:
                results.extend(future.result())
            except Exception as error:
                name_failed_item(error, first_item, len(chunk), chunk, calls_from=first_item)
                raise
            first_item += len(chunk)
            on_chunk_done(len(chunk))
    except BaseException:
        for future, _chunk in in_flight:
            if not future.done():
                cancel(future)
        raise


def _next_chunks(calls: Iterator[tuple[Any, ...]], chunk_size: int, count: int) -> list[Chunk]:
    chunks = []
    for _ in range(max(0, count)):
        chunk = list(itertools.islice(calls, chunk_size))
        if not chunk:
            break
        chunks.append(chunk)
    return chunks
