"""`client.executor()`: the client as a standard `concurrent.futures.Executor`, for code written against one.

What it owns: the futures it submitted and not yet finished (so that its `shutdown(cancel_futures=True)` cancels
those and no other work of the client), and its lazy `map`. It never stops the cluster and never disconnects the
client: a library that calls `executor.shutdown()` when it is done ends its own use of the cluster only.

`map` differs from the standard library's in one way, on purpose: it reads its iterables lazily, keeping at most
`buffersize` tasks in flight (by default a few per worker; Python 3.14's `buffersize` semantics), so a map over an
infinite or very long iterator runs in bounded memory. The first window is submitted at the call (so a call that
cannot be pickled raises there); the rest as results are consumed. `chunksize` groups that many calls into one
task, as ProcessPoolExecutor does. `timeout` counts from the call to `map`, and a result that is not ready by then
raises `TimeoutError` from the iterator, which then cancels what it submitted and ends.

At interpreter exit, as with the standard library's pools, the work of every executor still open or shut down without
waiting runs to its end before the interpreter goes (the client stays connected until then), and a `submit` from
then on raises RuntimeError. The hook runs first among exit hooks (`threading._register_atexit`, the one the standard
library's pools use), before `atexit`'s, which may close the client.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scaler.client.future import ScalerFuture
from scaler.client.map_chunks import run_chunk
from scaler.client.map_stream import chunks_in_flight
from scaler.client.session import Session

if TYPE_CHECKING:
    from scaler.client.client import Client

SHUTDOWN_MESSAGE = "cannot schedule new futures after shutdown"
EXIT_MESSAGE = "cannot schedule new futures after interpreter shutdown"

#: the unfinished futures of every executor made in this interpreter and still referenced, with the executor's lock
#: (its unfinished work is waited for at exit)
_executors: weakref.WeakKeyDictionary[ScalerExecutor, tuple[threading.Lock, set[ScalerFuture]]] = (
    weakref.WeakKeyDictionary()
)
_exit_lock = threading.Lock()
_exiting = False


class ScalerExecutor(concurrent.futures.Executor):
    """A `concurrent.futures.Executor` whose calls run on the cluster of a client's session (see the module's
    docstring); `client.executor()` makes one."""

    def __init__(self, session: Session | Client) -> None:
        self._session = session if isinstance(session, Session) else session.session
        self._lock = threading.Lock()
        self._unfinished: set[ScalerFuture] = set()  #: this executor's futures not done yet
        self._shut_down = False
        _executors[self] = (self._lock, self._unfinished)

    def __repr__(self) -> str:
        state = "shut down" if self._shut_down else f"{len(self._unfinished)} unfinished"
        return f"<ScalerExecutor of {self._session.address} ({state})>"

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> ScalerFuture:
        """Run `fn(*args, **kwargs)` on a worker; its future. RuntimeError after `shutdown`."""
        self._check_open()
        future = self._session.submit(fn, args, kwargs)
        with self._lock:
            self._unfinished.add(future)
        future.add_done_callback(self._forget)
        return future

    def map(
        self,
        fn: Callable[..., Any],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        buffersize: int | None = None,
    ) -> Iterator[Any]:
        """`fn` over the iterables (stopping at the shortest), results in order; lazy, see the module's docstring.
        `buffersize`: tasks kept in flight (None: a few per worker)."""
        if not isinstance(chunksize, int) or chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        if buffersize is not None and (not isinstance(buffersize, int) or isinstance(buffersize, bool)):
            raise TypeError("buffersize must be an integer or None")
        if buffersize is not None and buffersize < 1:
            raise ValueError("buffersize must be None or > 0")
        self._check_open()
        end_time = None if timeout is None else time.monotonic() + timeout
        window = buffersize if buffersize is not None else chunks_in_flight(self._session.worker_count)
        calls = zip(*iterables, strict=False)
        if chunksize == 1:
            tasks: Iterator[tuple[Callable[..., Any], tuple[Any, ...]]] = ((fn, call) for call in calls)
        else:
            runner = functools.partial(run_chunk, fn)
            tasks = ((runner, (chunk,)) for chunk in _chunks(calls, chunksize))
        in_flight: collections.deque[ScalerFuture] = collections.deque()
        try:
            for function, arguments in itertools.islice(tasks, window):
                in_flight.append(self.submit(function, *arguments))
        except BaseException:
            self._session.cancel_futures(list(in_flight))
            raise
        results = self._results(in_flight, tasks, end_time)
        return results if chunksize == 1 else _flatten(results)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more submissions; with `cancel_futures`, cancel this executor's tasks that no worker has started
        (the scheduler still queues them), leaving the running ones to finish, as the standard library's pools do;
        with `wait`, wait until its futures are done. The cluster and the client go on."""
        with self._lock:
            self._shut_down = True
            unfinished = list(self._unfinished)
        if cancel_futures:
            self._session.cancel_futures(unfinished, queued_only=True)
        if wait:
            concurrent.futures.wait(unfinished)

    # ------------------------------------------------------------ internals

    def _check_open(self) -> None:
        with self._lock:
            if self._shut_down:
                raise RuntimeError(SHUTDOWN_MESSAGE)
        with _exit_lock:
            if _exiting:
                raise RuntimeError(EXIT_MESSAGE)

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._unfinished.discard(future)

    def _results(
        self,
        in_flight: collections.deque[ScalerFuture],
        tasks: Iterator[tuple[Callable[..., Any], tuple[Any, ...]]],
        end_time: float | None,
    ) -> Generator[Any, None, None]:
        try:
            while in_flight:
                yield self._next_result(in_flight, tasks, end_time)  # no reference to the value stays here
        finally:
            self._session.cancel_futures(list(in_flight))

    def _next_result(
        self,
        in_flight: collections.deque[ScalerFuture],
        tasks: Iterator[tuple[Callable[..., Any], tuple[Any, ...]]],
        end_time: float | None,
    ) -> Any:
        future = in_flight.popleft()
        task = next(tasks, None)
        if task is not None:
            try:
                in_flight.append(self.submit(task[0], *task[1]))
            except BaseException:
                in_flight.appendleft(future)  # cancelled with the rest
                raise
        try:
            return future.result(None if end_time is None else end_time - time.monotonic())
        except concurrent.futures.TimeoutError:
            if not future.done():
                in_flight.appendleft(future)  # the map's own timeout: cancelled with the rest
            raise


def _at_exit() -> None:
    """Interpreter exit: no more submissions; wait for every executor's unfinished work (see the module docstring)."""
    global _exiting
    with _exit_lock:
        _exiting = True
    unfinished: list[ScalerFuture] = []
    for lock, futures in list(_executors.values()):
        with lock:
            unfinished.extend(futures)
    concurrent.futures.wait(unfinished)


threading._register_atexit(_at_exit)  # type: ignore[attr-defined]


def _flatten(chunk_results: Generator[list[Any], None, None]) -> Iterator[Any]:
    try:
        for chunk in chunk_results:
            yield from chunk
    finally:
        chunk_results.close()


def _chunks(calls: Iterator[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    while chunk := list(itertools.islice(calls, size)):
        yield chunk
