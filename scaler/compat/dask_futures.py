"""Dask's futures on scaler: `Future` (a task's, a scattered object's or a computed collection's), and the tasks that
wait in the client for the futures among their arguments (`Resolver`); `dask_waits` has the functions that take
futures (`wait`, `as_completed`, ...).

A `Future` stands for one of three things, each settled into `settled` (a plain `concurrent.futures.Future` done when
this one is; never carrying the value, which is read when asked for, on the asking thread):
- a task: its `ScalerFuture`; a task whose arguments hold futures not done yet waits here, in the client, for them
  (`Resolver`), then leaves with their values (Dask's dependencies: the scheduler does not hold a task behind another
  client-side future); a dependency that failed fails it with the same error, one cancelled cancels it;
- a scattered object: its reference in object storage, done at once;
- a collection being computed (`Client.compute`): a thread's future.
Pickled (inside an object a task receives, or in the graph of a persisted collection), a future waits for its value
and travels as it. Done callbacks run on a thread of this module's, never the client's I/O thread (they may read
results).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import re
import threading
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from scaler.client.future import ScalerFuture
from scaler.compat.callback_thread import CallbackThread
from scaler.errors import RemoteTraceback
from scaler.payload.references import ObjectReference

if TYPE_CHECKING:
    from scaler.compat.dask_client import Client

_NO_VALUE = object()
#: the states of Dask's `Future.status`
PENDING, FINISHED, ERROR, CANCELLED = "pending", "finished", "error", "cancelled"

#: runs the callbacks of `Future.add_done_callback`
_callbacks = CallbackThread("scaler-dask-callbacks")


class Future:
    """A Dask future (see the module docstring): `key`, `status`, `done()`, `result()`, `exception()`,
    `traceback()`, `add_done_callback()`, `cancel()`, `cancelled()`, `client`, and `await future`."""

    def __init__(self, key: str, client: Client) -> None:
        self.key = key
        self.client = client
        self.settled: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._inner: concurrent.futures.Future[Any] | None = None  #: the task's (or thread's), once there
        self._value: Any = _NO_VALUE  #: a scattered object's, read once
        self._stored: ObjectReference | None = None
        self._error: BaseException | None = None  #: a dependency's failure, before any task
        #: the futures its task waits for, until it is submitted: what holds on to this one holds on to them (their
        #: tasks' futures hold them only weakly)
        self._dependencies: list[Future] = []

    # ------------------------------------------------------------ made by the client

    def wait_for(self, dependencies: list[Future]) -> None:
        """Its task waits for these futures (`Resolver`)."""
        self._dependencies = dependencies

    def attach(self, inner: concurrent.futures.Future[Any]) -> None:
        """The task (or thread) behind this future, once it is submitted."""
        self._dependencies = []
        self._inner = inner
        myself = weakref.ref(self)  # the task's future (the client may keep it a while) does not keep this one alive
        inner.add_done_callback(lambda done: _inner_done(myself, done))

    def store(self, reference: ObjectReference, value: Any = _NO_VALUE) -> None:
        """A scattered object: done at once."""
        self._stored = reference
        self._value = value
        self.settled.set_result(None)

    def fail(self, error: BaseException) -> None:
        """It will never run: a dependency failed (its error) or was cancelled (a CancelledError)."""
        self._dependencies = []
        self._error = error
        if isinstance(error, concurrent.futures.CancelledError):
            _cancel(self.settled)
        elif not self.settled.done():
            self.settled.set_result(None)

    def inner_done(self, inner: concurrent.futures.Future[Any]) -> None:
        if inner.cancelled():
            _cancel(self.settled)
        elif not self.settled.done():
            self.settled.set_result(None)

    # ------------------------------------------------------------ Dask's API

    @property
    def status(self) -> str:
        if not self.settled.done():
            return PENDING
        if self.cancelled():
            return CANCELLED
        return ERROR if self.exception(timeout=0) is not None else FINISHED

    @property
    def type(self) -> type | None:
        """The type of the result, once finished (None before)."""
        return type(self.result()) if self.status == FINISHED else None

    def done(self) -> bool:
        return self.settled.done()

    def cancelled(self) -> bool:
        return self.settled.cancelled()

    def result(self, timeout: float | str | None = None) -> Any:
        """The value (its task's exception raised; CancelledError when cancelled). `timeout`: seconds, or Dask's
        text ("10 ms", "2 s"); TimeoutError after it."""
        self._wait(seconds(timeout))
        if self._error is not None:
            raise self._error
        if self._stored is not None:
            if self._value is _NO_VALUE:
                self._value = self.client.native.session.read(self._stored)
            return self._value
        assert self._inner is not None
        return self._inner.result()

    def exception(self, timeout: float | str | None = None) -> BaseException | None:
        self._wait(seconds(timeout))
        if self._error is not None:
            return self._error
        if self._stored is not None:
            return None
        assert self._inner is not None
        return self._inner.exception()

    def traceback(self, timeout: float | str | None = None) -> Any:
        """The traceback of the task's exception, with the frames it had on the worker (`traceback.extract_tb` reads
        them as Dask's); None when it did not fail."""
        error = self.exception(timeout)
        if error is None:
            return None
        cause = error.__cause__
        if isinstance(cause, RemoteTraceback):
            return remote_traceback(cause.text) or error.__traceback__
        return error.__traceback__

    def add_done_callback(self, fn: Callable[[Future], Any]) -> None:
        """Call `fn(self)` once done (finished, failed or cancelled), on a thread of its own."""
        self.settled.add_done_callback(lambda _settled: _callbacks.submit(fn, self))

    def cancel(self, reason: str | None = None, msg: str | None = None) -> None:
        """Cancel its task (a task waiting for its dependencies never leaves)."""
        self.client.cancel([self])

    def release(self) -> None:
        """Forget it here (Dask's explicit release); its task goes on unless cancelled."""
        self.client.forget(self)

    def argument(self) -> Any:
        """What a task given this future as an argument receives (waiting for it): a scattered object's storage
        reference (the worker reads it), else the value (read here)."""
        if self._stored is not None and self._error is None:
            return self._stored
        return self.result()

    __scaler_argument__ = argument  #: how a Dask graph holding this future (a persisted collection) resolves it

    def task_future(self) -> concurrent.futures.Future[Any] | None:
        """The future of the task (or thread) behind it, once submitted."""
        return self._inner

    def __await__(self) -> Any:
        async def value() -> Any:
            await asyncio.wait([asyncio.wrap_future(self.settled)])
            return self.result()

        return value().__await__()

    def __dask_tokenize__(self) -> str:
        return self.key

    def __reduce__(self) -> Any:
        """Pickled (inside an object a task receives, or a persisted collection's graph): what a task receives for it,
        waiting for it here; a failed future raises its error."""
        return (_received, (self.argument(),))

    def __repr__(self) -> str:
        status = self.status
        kind = f", type: {type(self.result()).__name__}" if status == FINISHED else ""
        return f"<Future: {status}{kind}, key: {self.key}>"

    def _wait(self, timeout: float | None) -> None:
        if self.settled.done():
            if self.settled.cancelled():
                raise concurrent.futures.CancelledError(self.key)
            return
        inner = self._inner
        if isinstance(inner, ScalerFuture):  # its wait reads the connection itself when it can
            try:
                inner.exception(timeout)
            except concurrent.futures.CancelledError:
                raise concurrent.futures.CancelledError(self.key) from None
            except concurrent.futures.TimeoutError:
                raise TimeoutError(f"the future {self.key} is not done after {timeout} s") from None
            return  # done (its callback settles this one at once, maybe an instant after this thread woke)
        try:
            self.settled.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the future {self.key} is not done after {timeout} s") from None
        except concurrent.futures.CancelledError:
            raise concurrent.futures.CancelledError(self.key) from None


def seconds(timeout: float | str | None) -> float | None:
    """A timeout in seconds from Dask's forms: a number, or text with a unit ("10 ms", "1.5s", "2 minutes")."""
    if timeout is None or isinstance(timeout, (int, float)):
        return timeout
    text = timeout.strip().lower().replace(" ", "")
    units = (("ms", 0.001), ("milliseconds", 0.001), ("us", 1e-6), ("minutes", 60.0), ("minute", 60.0),
             ("min", 60.0), ("m", 60.0), ("hours", 3600.0), ("h", 3600.0), ("seconds", 1.0), ("second", 1.0),
             ("s", 1.0))  # fmt: skip
    for unit, factor in sorted(units, key=lambda pair: -len(pair[0])):
        if text.endswith(unit):
            number = text[: -len(unit)]
            try:
                return float(number) * factor
            except ValueError:
                break
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"timeout: a number of seconds or a duration such as '10 ms', not {timeout!r}") from None


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')


class _RemoteFrames(Exception):
    """Raised through stand-ins of a worker's frames, for their traceback (`remote_traceback`)."""


def remote_traceback(text: str) -> types.TracebackType | None:
    """A traceback object with the frames a worker's traceback text names (file, line and function of each), as
    Dask's futures give one: made by raising through code objects placed at those lines."""
    frames = [(m["file"], int(m["line"]), m["name"]) for m in map(_FRAME.match, text.splitlines()) if m]
    if not frames:
        return None
    fakes: set[types.CodeType] = set()

    def call(index: int) -> None:
        if index == len(frames):
            raise _RemoteFrames
        filename, line, name = frames[index]
        code = compile("\n" * (line - 1) + "step(index + 1)", filename, "exec").replace(co_name=name)
        fakes.add(code)
        exec(code, {"step": call, "index": index})

    try:
        call(0)
    except _RemoteFrames as raised:
        found = raised.__traceback__
    kept: list[types.TracebackType] = []
    while found is not None:
        if found.tb_frame.f_code in fakes:
            kept.append(found)
        found = found.tb_next
    chain: types.TracebackType | None = None
    for entry in reversed(kept):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


def _inner_done(future: weakref.ref[Future], inner: concurrent.futures.Future[Any]) -> None:
    found = future()
    if found is not None:
        found.inner_done(inner)


def _received(value: Any) -> Any:
    """A pickled future, unpickled: its value (in a task, a scattered object's reference unpickles as the object)."""
    return value


def _cancel(future: concurrent.futures.Future[Any]) -> None:
    """Cancel a pending plain future and wake its waiters (Future.cancel alone does not)."""
    if future.done():
        return
    if future.cancel():
        try:
            future.set_running_or_notify_cancel()
        except RuntimeError:  # another thread cancelled and notified it meanwhile
            pass


def is_future(value: Any) -> bool:
    return isinstance(value, Future)


# ---------------------------------------------------------------- tasks waiting for their arguments' futures


class WaitingTask(NamedTuple):
    future: Future
    submit: Callable[[], concurrent.futures.Future[Any]]  #: submits the task with its arguments' values
    dependencies: list[Future]


class Resolver:
    """Submits the tasks whose arguments name futures not done yet, from a thread of its own, once those are done."""

    def __init__(self) -> None:
        self._events: queue.SimpleQueue[WaitingTask | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def add(self, waiting: WaitingTask) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="scaler-dask-dependencies", daemon=True)
                self._thread.start()
        left = [len(waiting.dependencies)]
        counter = threading.Lock()

        def one_done(_settled: concurrent.futures.Future[None]) -> None:
            with counter:
                left[0] -= 1
                ready = left[0] == 0
            if ready:
                self._events.put(waiting)

        for dependency in waiting.dependencies:
            dependency.settled.add_done_callback(one_done)

    def close(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._events.put(None)
                self._thread = None

    def _run(self) -> None:
        while (waiting := self._events.get()) is not None:
            future = waiting.future
            if future.done():  # cancelled meanwhile
                continue
            failed = next((d for d in waiting.dependencies if d.cancelled() or d.exception() is not None), None)
            if failed is not None:
                future.fail(concurrent.futures.CancelledError(failed.key) if failed.cancelled() else _error(failed))
                continue
            try:
                future.attach(waiting.submit())
            except BaseException as error:
                future.fail(error)


def _error(future: Future) -> BaseException:
    error = future.exception()
    assert error is not None
    return error


def resolved(value: Any) -> Any:
    """`value` with each (done) future in it, also inside lists, tuples, sets and dicts, replaced by what a task
    receives for it (`Future.argument`)."""
    if isinstance(value, Future):
        return value.argument()
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [resolved(item) for item in value]
        return type(value)(items) if type(value) in (list, tuple, set, frozenset) else tuple(items)
    if isinstance(value, dict):
        return {key: resolved(item) for key, item in value.items()}
    return value
