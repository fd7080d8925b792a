"""How the browser client's blocking calls (`future.result()`, `map`, `send_object`) wait: by running the event loop
until what they wait for is done.

In a browser that is Pyodide's `run_sync`, which suspends Python's stack while the page's event loop runs (WebAssembly's
JavaScript Promise Integration, JSPI: Chrome and Edge 137 and later; Firefox and Safari not yet) and so needs the code
to have been started by `runPythonAsync` (a notebook cell, a console line). Outside a browser (CPython: this client's
tests) it is a loop of the client's own, run until the wait is over: its connections make progress only while a call
waits, which is enough for a script.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from scaler.browser.links_base import is_browser

T = TypeVar("T")

NO_JSPI = (
    "this page cannot wait for the cluster in a plain call: its browser has no WebAssembly JSPI (Chrome or Edge 137 or "
    "later have it), or the code was not started as a notebook cell or console line (Pyodide's runPythonAsync)"
)


class Waiting:
    """Runs coroutines to their end from synchronous code, on the loop the client's connections live on."""

    def __init__(self) -> None:
        if is_browser():
            self.loop = asyncio.get_event_loop()  # Pyodide's WebLoop: the page's event loop, always running
        else:
            self.loop = asyncio.new_event_loop()
        self._closed = False

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, waited for here."""
        if not is_browser():
            return self.loop.run_until_complete(coroutine)
        from pyodide.ffi import can_run_sync, run_sync  # type: ignore[import-not-found]

        if not can_run_sync():
            coroutine.close()
            raise RuntimeError(NO_JSPI)
        return run_sync(coroutine)  # type: ignore[no-any-return]

    def until(self, done: Callable[[], bool], changed: asyncio.Event, timeout_seconds: float | None) -> bool:
        """Wait until `done()` (checked whenever `changed` is set) or the timeout; whether it is done."""
        if done():
            return True
        return self.run(_until(done, changed, timeout_seconds))

    def start(self, coroutine: Awaitable[Any]) -> asyncio.Future[Any]:
        """A routine that runs on the loop alongside (heartbeats, reading)."""
        return asyncio.ensure_future(coroutine, loop=self.loop)

    def close(self) -> None:
        if self._closed or is_browser():
            return
        self._closed = True
        pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()


async def _until(done: Callable[[], bool], changed: asyncio.Event, timeout_seconds: float | None) -> bool:
    loop = asyncio.get_running_loop()
    deadline = None if timeout_seconds is None else loop.time() + timeout_seconds
    while not done():
        changed.clear()
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            return False
        try:
            await asyncio.wait_for(changed.wait(), left)
        except asyncio.TimeoutError:
            return done()
    return True
