"""Progress of many futures: a tqdm bar on stderr (a widget in Jupyter: tqdm's auto mode picks it) that
counts finished items while the caller waits.

    client.map(fn, items, progress=True)
    scaler.progress(futures)          # waits for any list of futures, showing the bar; returns them

Futures complete on the client's I/O thread; their callbacks only add to a counter, and the waiting thread
moves the bar, so the I/O thread never waits on the terminal.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: How often the bar is redrawn while waiting.
REFRESH_SECONDS = 0.1


class ItemCounter:
    """Items finished so far; a future may stand for several items (a chunk of a map)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.done = 0

    def watch(self, future: concurrent.futures.Future[Any], items: int) -> None:
        def finished(_future: concurrent.futures.Future[Any]) -> None:
            with self._lock:
                self.done += items

        future.add_done_callback(finished)


def wait_with_bar(
    futures: Sequence[concurrent.futures.Future[Any]],
    items_per_future: Sequence[int] | None = None,
    description: str = "scaler",
    stop_at_first_exception: bool = True,
) -> None:
    """Wait for `futures` (until the first exception, unless told otherwise) while a bar counts their items."""
    from tqdm.auto import tqdm

    weights = list(items_per_future) if items_per_future is not None else [1] * len(futures)
    counter = ItemCounter()
    for future, items in zip(futures, weights, strict=True):
        counter.watch(future, items)
    when = concurrent.futures.FIRST_EXCEPTION if stop_at_first_exception else concurrent.futures.ALL_COMPLETED
    with tqdm(total=sum(weights), desc=description, unit="task", dynamic_ncols=True) as bar:
        pending: Any = futures
        while pending:
            began = time.monotonic()
            _finished, pending = concurrent.futures.wait(pending, timeout=REFRESH_SECONDS, return_when=when)
            bar.update(counter.done - bar.n)
            if pending and time.monotonic() - began < REFRESH_SECONDS:
                break  # back early with work left: a future raised (FIRST_EXCEPTION)
        bar.update(counter.done - bar.n)


def progress(futures: Sequence[concurrent.futures.Future[Any]], description: str = "scaler") -> list[Any]:
    """Wait for every future of `futures`, showing a progress bar; returns them (done, failed or cancelled)."""
    futures = list(futures)
    wait_with_bar(futures, description=description, stop_at_first_exception=False)
    return futures


@contextlib.contextmanager
def progress_counter(total: int | None, shown: bool, description: str = "scaler") -> Iterator[Callable[[int], None]]:
    """A function that counts items done on a bar of `total` items (None: not known; the bar counts) on stderr, or
    a widget in Jupyter; a function that does nothing when the bar is not `shown`."""
    if not shown:
        yield lambda _items: None
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=description, unit="task", dynamic_ncols=True) as bar:
        yield bar.update
