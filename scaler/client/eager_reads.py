"""Results read as soon as they are done, however the user waits for them: a client off the object storage's host
whose tasks store their results (large values) would read each only when the user takes it, one transfer after the
other when the user takes them in a loop of `result()` or `as_completed`. `EagerReads` is told of each stored result
as its task is answered (on the thread that reads the client's connection) and reads its value into the future at
once, at most READ_AHEAD at once, each on a connection of its own (`ClientObjectStorage.as_reader`), in the order the
tasks finished: the client link carries them back to back while the user still waits for the first.

What is read and not taken yet is bounded: at most EAGER_BYTES of stored results are held so. A value is taken when
the user asks its future (`result()`, `exception()`) or drops the future; until then a result that does not fit waits
its turn, and one larger than the whole budget is read only when taken. A read that fails is not remembered: the
user's `result()` reads again (future.py). On the storage's host nothing is read early: results are mapped there, not
transferred. `gather` and `map` say which results they take (read_ahead.py), which are read then whatever the budget.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from scaler.client.read_ahead import READ_AHEAD

#: The bytes of stored results read and not taken yet that a client holds at most.
EAGER_BYTES = 256 << 20


class EagerFuture(Protocol):
    """What is read into: a future that reads its value when first asked (future.py)."""

    def read_before_taken(self, taken: Callable[[], None]) -> bool: ...


class EagerReads:
    """`on_reader_thread(function)` runs `function` with that thread's own storage connection in use;
    `reads_locally()` says whether results are mapped here (asked once, on a reading thread: it may connect)."""

    def __init__(
        self,
        on_reader_thread: Callable[[Callable[[], Any]], Any],
        reads_locally: Callable[[], bool],
        budget_bytes: int = EAGER_BYTES,
        at_once: int = READ_AHEAD,
    ) -> None:
        self._on_reader_thread = on_reader_thread
        self._reads_locally = reads_locally
        self._budget_bytes = budget_bytes
        self._at_once = at_once
        self._lock = threading.Lock()
        self._waiting: collections.deque[tuple[weakref.ref[Any], int]] = collections.deque()
        self._held_bytes = 0  #: read (or being read) and not taken yet
        self._reading = 0
        self._local: bool | None = None  #: None: not asked yet
        self._closed = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def held_bytes(self) -> int:
        return self._held_bytes

    def done(self, answered: Iterable[tuple[EagerFuture, int]]) -> None:
        """Futures whose tasks' results were just stored, with their sizes: each is read once the budget has room."""
        with self._lock:
            if self._closed or self._local:
                return
            for future, size in answered:
                if size <= self._budget_bytes:
                    self._waiting.append((weakref.ref(future), size))
            self._start_reads()

    def close(self) -> None:
        """Read nothing more; reads under way end on their own (the storage's connections close under them)."""
        with self._lock:
            self._closed = True
            self._waiting.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _start_reads(self) -> None:
        """Under the lock: start the next reads while fewer than `at_once` run and the budget has room."""
        while self._waiting and self._reading < self._at_once:
            reference, size = self._waiting[0]
            if self._held_bytes + size > self._budget_bytes:
                return
            self._waiting.popleft()
            if reference() is None:  # the user dropped it
                continue
            self._held_bytes += size
            self._reading += 1
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(self._at_once, thread_name_prefix="scaler-eager")
            self._pool.submit(self._read, reference, size)

    def _read(self, reference: weakref.ref[Any], size: int) -> None:
        released = threading.Event()  # set once, by whichever comes first: taken, dropped, or not read

        def release() -> None:
            with self._lock:
                if released.is_set():
                    return
                released.set()
                self._held_bytes -= size
                self._start_reads()

        try:
            if self._local is None:
                self._local = bool(self._reads_locally())
            if self._local or not self._on_reader_thread(lambda: _read_into(reference, release)):
                release()
        except Exception:  # a read that fails is the user's result() to read again, and to raise
            release()
        finally:
            with self._lock:
                self._reading -= 1
                if self._local:
                    self._waiting.clear()
                self._start_reads()


def _read_into(reference: weakref.ref[Any], release: Callable[[], None]) -> bool:
    """Read the future's value if the user still holds it: True when read here (then `release` is called when the
    value is taken or the future dropped)."""
    future = reference()
    if future is None or not future.read_before_taken(release):
        return False
    weakref.finalize(future, release)  # dropped without being taken
    return True
