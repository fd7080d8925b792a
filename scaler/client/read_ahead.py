"""Results read ahead, several at once: a client off the object storage's host that takes many large results in turn
(`Client.map`, `Client.gather`, the maps' gather) would read each only when it comes to it, one transfer after the
other on one connection. Told which futures it takes next (`ahead`), `ReadAhead` reads the values of the first
READ_AHEAD of them as each is done; told that it takes them all (`each`: a gather, which holds every value anyway), it
reads each as it is done, in the order they finish, so that the first done are read while the rest still run. At most
READ_AHEAD are read at once, each on a connection of its own (`ClientObjectStorage.as_reader`), while the caller waits:
a value read ahead is what that future's `result()` returns (the future keeps it, as it would have). On the storage's
host nothing is read ahead: results are mapped there, not transferred."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable
from typing import Any

#: How many results are read at once, and how far ahead of the one the caller takes.
READ_AHEAD = 4


class ReadAhead:
    """`on_reader_thread(function)` runs `function` with that thread's own storage connection in use."""

    def __init__(self, on_reader_thread: Callable[[Callable[[], Any]], Any]) -> None:
        self._on_reader_thread = on_reader_thread
        self._pool = concurrent.futures.ThreadPoolExecutor(READ_AHEAD, thread_name_prefix="scaler-read-ahead")
        self._seen: set[int] = set()  #: the futures already told of (by id: futures compare by identity anyway)
        self._lock = threading.Lock()
        self._closed = False

    def ahead(self, futures: Iterable[Any]) -> None:
        """The caller takes these next, in order: each of the first READ_AHEAD is read once it is done."""
        for count, future in enumerate(futures):
            if count >= READ_AHEAD:
                return
            if id(future) not in self._seen:
                self._seen.add(id(future))
                future.add_done_callback(self._read)  # at once when done already

    def each(self, futures: Iterable[Any]) -> None:
        """The caller takes all of these (a gather): each is read once it is done, in the order they finish, at most
        READ_AHEAD at once."""
        for future in futures:
            if id(future) not in self._seen:
                self._seen.add(id(future))
                future.add_done_callback(self._read)

    def _read(self, future: Any) -> None:
        with self._lock:
            if not self._closed:
                self._pool.submit(self._on_reader_thread, lambda: _read_value(future))

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class NoReadAhead:
    """Where nothing is read ahead (a client on the storage's host, a single result)."""

    def ahead(self, futures: Iterable[Any]) -> None:
        pass

    def each(self, futures: Iterable[Any]) -> None:
        pass

    def __enter__(self) -> NoReadAhead:
        return self

    def __exit__(self, *_: object) -> None:
        pass


def _read_value(future: Any) -> None:
    """Read the future's value into it; what fails is for the caller to see when it takes it (`result()`)."""
    try:
        future.exception(0)
    except BaseException:  # cancelled, or not read: the caller's result() says it
        pass
