"""Ray's `ray.util.ActorPool` on scaler's actors: a fixed set of actors that take values one at a time each.

`pool.submit(fn, value)` runs `fn(actor, value)` (which calls a method: `lambda a, v: a.double.remote(v)`) on an
idle actor of the pool, or keeps it until one is idle; `get_next()` gives the results in the order they were
submitted, `get_next_unordered()` whichever is done first; `map` and `map_unordered` do both for a whole iterable.
An actor is idle again once its result was taken (by either `get_next`), and then takes the oldest value kept.

The behaviour is Ray's, as its documentation and its own tests describe it: `get_next` with nothing submitted raises
StopIteration; a timeout raises TimeoutError, and with `ignore_if_timedout=True` that result is skipped (its actor
is idle again); `map` first skips what earlier submissions left unread; `push` of an actor the pool has raises
ValueError; a task's error is raised by the `get_next` that reaches it, its actor idle again.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from scaler.compat.ray_waits import get, wait

#: `fn(actor, value)`: an ObjectRef (or a list of them) of the call it made.
Submit = Callable[[Any, Any], Any]


class ActorPool:
    def __init__(self, actors: Iterable[Any]) -> None:
        self._idle: list[Any] = list(actors)
        self._waiting: collections.deque[tuple[Submit, Any]] = collections.deque()  #: values no actor took yet
        self._running: dict[int, tuple[Any, Any]] = {}  #: submission index -> (its references, its actor)
        self._submitted = 0  #: the index the next call started gets

    def submit(self, fn: Submit, value: Any) -> None:
        """Run `fn(actor, value)` on an idle actor, or once one is idle (in the order of the submissions)."""
        if not self._idle:
            self._waiting.append((fn, value))
            return
        actor = self._idle.pop()
        self._running[self._submitted] = (fn(actor, value), actor)
        self._submitted += 1

    def has_next(self) -> bool:
        """Whether a result is still to be taken (running, or waiting for an actor)."""
        return bool(self._running or self._waiting)

    def get_next(self, timeout: float | None = None, ignore_if_timedout: bool = False) -> Any:
        """The next result in the order of the submissions (StopIteration when none is left)."""
        self._check_next()
        index = min(self._running)  # the oldest submission not taken yet
        refs, actor = self._running[index]
        if not self._ready([refs], timeout):
            if not ignore_if_timedout:
                raise TimeoutError("Timed out waiting for result")
            self._taken(index, actor)
            raise TimeoutError("Timed out waiting for result; it is skipped (ignore_if_timedout)")
        self._taken(index, actor)
        return self._get(refs)

    def get_next_unordered(self, timeout: float | None = None, ignore_if_timedout: bool = False) -> Any:
        """Any result that is done (the first to be, waiting up to `timeout`; StopIteration when none is left)."""
        self._check_next()
        running = list(self._running.items())
        done = self._first_ready([refs for _, (refs, _) in running], timeout)
        if done is None:
            raise TimeoutError("Timed out waiting for result")
        index, (refs, actor) = running[done]
        self._taken(index, actor)
        return self._get(refs)

    def map(self, fn: Submit, values: Iterable[Any]) -> Iterator[Any]:
        """`fn(actor, value)` for every value; the results in the order of `values`."""
        self._skip_unread()
        for value in values:
            self.submit(fn, value)
        return self._results(self.get_next)

    def map_unordered(self, fn: Submit, values: Iterable[Any]) -> Iterator[Any]:
        """`fn(actor, value)` for every value; the results as they are done."""
        self._skip_unread()
        for value in values:
            self.submit(fn, value)
        return self._results(self.get_next_unordered)

    def has_free(self) -> bool:
        """Whether an actor is idle and no value waits for one."""
        return bool(self._idle) and not self._waiting

    def pop_idle(self) -> Any | None:
        """Take an idle actor out of the pool (None when none is free)."""
        return self._idle.pop() if self.has_free() else None

    def push(self, actor: Any) -> None:
        """Add an actor to the pool (it takes the oldest value waiting, if any)."""
        if any(actor is known for known in (*self._idle, *(held for _, held in self._running.values()))):
            raise ValueError("Actor already belongs to current ActorPool")
        self._now_idle(actor)

    # ------------------------------------------------------------ inside

    def _results(self, take: Callable[[], Any]) -> Iterator[Any]:
        while self.has_next():
            yield take()

    def _skip_unread(self) -> None:
        """What earlier submissions left unread is dropped once done, as Ray's `map` drops it."""
        while self.has_next():
            try:
                self.get_next(timeout=0, ignore_if_timedout=True)
            except TimeoutError:
                pass
            except Exception:  # an earlier task's error: dropped with its result
                pass

    def _check_next(self) -> None:
        if not self.has_next():
            raise StopIteration("No more results to get")
        if not self._running:
            raise ValueError("this ActorPool has no actor to run the values submitted to it: push() one")

    def _taken(self, index: int, actor: Any) -> None:
        del self._running[index]
        self._now_idle(actor)

    def _now_idle(self, actor: Any) -> None:
        self._idle.append(actor)
        if self._waiting:
            fn, value = self._waiting.popleft()
            self.submit(fn, value)

    @staticmethod
    def _flat(refs: Any) -> list[Any]:
        return list(refs) if isinstance(refs, (list, tuple)) else [refs]

    def _ready(self, calls: list[Any], timeout: float | None) -> bool:
        return self._first_ready(calls, timeout) is not None

    def _first_ready(self, calls: list[Any], timeout: float | None) -> int | None:
        """The position in `calls` of one whose references are all done (the first in `calls` when several are),
        waiting up to `timeout` seconds (None: no limit); None when none is done by then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = [ref for refs in calls for ref in self._flat(refs)]
        owner = {id(ref): position for position, refs in enumerate(calls) for ref in self._flat(refs)}
        left = {position: len(self._flat(refs)) for position, refs in enumerate(calls)}
        while True:
            ready, pending = wait(pending, num_returns=len(pending), timeout=0)
            for ref in ready:
                left[owner[id(ref)]] -= 1
            done = [position for position, count in left.items() if count == 0]
            if done:
                return done[0]
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            more, pending = wait(pending, num_returns=1, timeout=remaining)
            for ref in more:
                left[owner[id(ref)]] -= 1
            if more and any(count == 0 for count in left.values()):
                return next(position for position, count in left.items() if count == 0)

    @staticmethod
    def _get(refs: Any) -> Any:
        return get(list(refs) if isinstance(refs, tuple) else refs)
