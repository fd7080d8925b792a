"""The functions of Dask's `distributed` that take futures (`dask_futures.Future`): `wait`, `as_completed`,
`fire_and_forget` and `futures_of`; each waits on a future's `settled`, never on its value (read when asked for)."""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from scaler.client.gathering import futures_in
from scaler.compat.dask_futures import Future, is_future, seconds


class DoneAndNotDoneFutures(NamedTuple):
    done: set[Future]
    not_done: set[Future]


def futures_of(value: Any) -> list[Future]:
    """The futures in `value`: itself, those in lists, tuples, sets and dicts, and those a persisted Dask collection
    holds."""
    graph = getattr(value, "__dask_graph__", None)
    if graph is not None:
        nodes = graph()
        found = [getattr(node, "value", node) for node in (nodes.values() if nodes is not None else ())]
        return list(dict.fromkeys(f for f in found if isinstance(f, Future)))
    return list(dict.fromkeys(futures_in(value, is_future)))


def wait(
    fs: Future | Iterable[Any] | Any, timeout: float | str | None = None, return_when: str = "ALL_COMPLETED"
) -> DoneAndNotDoneFutures:
    """Wait for futures (or a persisted collection's): all of them, the first one done (`FIRST_COMPLETED`) or the
    first failed (`FIRST_EXCEPTION`). TimeoutError when `timeout` seconds pass first (Dask's: not a partial answer)."""
    if return_when not in ("ALL_COMPLETED", "FIRST_COMPLETED", "FIRST_EXCEPTION"):
        raise ValueError(f"return_when must be ALL_COMPLETED, FIRST_COMPLETED or FIRST_EXCEPTION, not {return_when!r}")
    timeout = seconds(timeout)
    futures = futures_of(fs)
    by_settled = {id(future.settled): future for future in futures}
    if return_when == "FIRST_EXCEPTION":
        done = _wait_first_exception(futures, timeout)
    else:
        waited = concurrent.futures.wait([f.settled for f in futures], timeout, return_when)
        done = {by_settled[id(settled)] for settled in waited.done}
    if (futures and not done) or (return_when == "ALL_COMPLETED" and len(done) < len(futures)):
        raise TimeoutError(f"{len(futures) - len(done)} of {len(futures)} futures not done after {timeout} s")
    return DoneAndNotDoneFutures(done, set(futures) - done)


def _wait_first_exception(futures: list[Future], timeout: float | None) -> set[Future]:
    """Done futures once one failed or all are done."""
    pending = {future.settled: future for future in futures}
    done: set[Future] = set()
    deadline = None if timeout is None else _now() + timeout
    while pending:
        left = None if deadline is None else max(0.0, deadline - _now())
        finished, _ = concurrent.futures.wait(list(pending), left, concurrent.futures.FIRST_COMPLETED)
        if not finished:
            break
        for settled in finished:
            future = pending.pop(settled)
            done.add(future)
            if future.cancelled() or future.exception() is not None:
                return done
    return done


def _now() -> float:
    return time.monotonic()


def fire_and_forget(obj: Any) -> None:
    """Let the tasks of these futures run to their end even once nothing here holds them: their client keeps them,
    and its close() waits for them before it leaves (a scaler client that leaves cancels its tasks)."""
    for future in futures_of(obj):
        future.client.keep_until_done(future)


class as_completed(Iterator[Any]):
    """The futures as they are done, in that order (`(future, result)` pairs with `with_results=True`; a failed
    future's error is then raised, unless `raise_errors=False`). More can be added while iterating (`add`,
    `update`); `batches()` gives lists of those done since the last one."""

    def __init__(
        self, futures: Iterable[Future] | None = None, loop: Any = None, with_results: bool = False,
        raise_errors: bool = True, *, timeout: float | None = None,
    ) -> None:  # fmt: skip
        self._with_results = with_results
        self._raise_errors = raise_errors
        self._timeout = timeout
        self._condition = threading.Condition()
        self._ready: list[Future] = []
        self._pending = 0
        #: the futures not done yet, held here: one added and held nowhere else (`seq.add(client.submit(...))`) would
        #: be collected before its task ends (its task's future holds it weakly), and never come
        self._held: dict[Future, int] = {}
        self._order = itertools.count()
        if futures is not None:
            self.update(futures)

    def add(self, future: Future) -> None:
        with self._condition:
            self._pending += 1
            self._held[future] = self._held.get(future, 0) + 1
        future.settled.add_done_callback(lambda _settled: self._one_done(future))

    def update(self, futures: Iterable[Future]) -> None:
        for future in futures:
            self.add(future)

    def _one_done(self, future: Future) -> None:
        with self._condition:
            self._pending -= 1
            left = self._held.pop(future, 1) - 1
            if left:
                self._held[future] = left
            self._ready.append(future)
            self._condition.notify_all()

    def count(self) -> int:
        with self._condition:
            return self._pending + len(self._ready)

    def __len__(self) -> int:
        return self.count()

    def is_empty(self) -> bool:
        return self.count() == 0

    def has_ready(self) -> bool:
        with self._condition:
            return bool(self._ready)

    def clear(self) -> None:
        with self._condition:
            self._ready.clear()

    def __iter__(self) -> as_completed:
        return self

    def __next__(self) -> Any:
        batch = self._take(block=True, one=True)
        if not batch:
            raise StopIteration
        return batch[0]

    def next_batch(self, block: bool = True) -> list[Any]:
        return self._take(block, one=False)

    def batches(self) -> Iterator[list[Any]]:
        while True:
            batch = self._take(block=True, one=False)
            if not batch:
                return
            yield batch

    def _take(self, block: bool, one: bool) -> list[Any]:
        with self._condition:
            if block and not self._ready and self._pending:
                if not self._condition.wait_for(lambda: self._ready or not self._pending, self._timeout):
                    raise TimeoutError(f"as_completed: nothing done within {self._timeout} s")
            taken = self._ready[:1] if one else list(self._ready)
            del self._ready[: len(taken)]
        return [self._item(future) for future in taken]

    def _item(self, future: Future) -> Any:
        if not self._with_results:
            return future
        try:
            return future, future.result()
        except BaseException as error:
            if self._raise_errors:
                raise
            return future, error


def keep(futures: set[Future], future: Future, lock: threading.Lock) -> None:
    """Hold `future` in `futures` until it is done."""
    with lock:
        futures.add(future)

    def forget(_settled: concurrent.futures.Future[None]) -> None:
        with lock:
            futures.discard(future)

    future.settled.add_done_callback(forget)
