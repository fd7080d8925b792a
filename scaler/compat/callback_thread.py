"""One thread, started when first needed, that runs a front end's completion callbacks one after another (a peer's
callbacks may block, read results or submit more work: they must not run on the client's own threads).

In a forked child (a process pool's worker that uses the front end itself) the parent's thread is not there, so the
child starts its own."""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any


class CallbackThread:
    def __init__(self, thread_name_prefix: str) -> None:
        self._thread_name_prefix = thread_name_prefix
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows)
            os.register_at_fork(after_in_child=self._forget)

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=self._thread_name_prefix)
            executor = self._executor
        return executor.submit(fn, *args)

    def _forget(self) -> None:
        self._executor, self._lock = None, threading.Lock()
