"""Ray's object references on scaler: `ObjectRef`, and the calls that wait for the tasks their arguments name.

An `ObjectRef` is one of three things: the result of a task (a future, and for `num_returns > 1` an index into the
task's returned sequence), an object stored with `ray.put` (a scaler `ObjectReference`), or a value already at hand
(a stored object inside a task, which the processor has fetched).

Arguments follow Ray's rule. A reference given as a top-level argument of a remote call is replaced by its value:
a stored object travels as its storage reference (the worker fetches it); a task's result is read by the client
once the task is done. A call whose top-level arguments name unfinished tasks is *deferred*: `.remote()` returns at
once, and the call is submitted by `DeferredCalls`' thread when those tasks are done (or fails with the first one's
error). A reference nested inside an argument travels as a reference: pickling a task's reference stores its value
in object storage (waiting for it), so the receiving task's `ray.get` reads it there.
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib
import itertools
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from scaler.compat.ray_errors import RayError, as_ray_error
from scaler.payload.references import ObjectReference
from scaler.protocol.ids import short_task_id

_NO_VALUE = object()
T = TypeVar("T")


class GetTimeoutError(RayError, TimeoutError):
    """`ray.get(..., timeout=...)` ran out of time (Ray's `ray.exceptions.GetTimeoutError`)."""


#: How the current session reads a stored object, set by `ray_session` (which knows the session; this module does not
#: import it): what `ObjectRef.future()` and `await ref` read a `ray.put` reference with.
session_reader: Callable[[], Callable[[ObjectReference], Any]] | None = None


class ObjectRef:
    """A reference to a task's result or a stored object (see the module docstring)."""

    __slots__ = ("_future", "_index", "_store", "_stored", "_value")

    def __init__(
        self,
        future: concurrent.futures.Future[Any] | None = None,
        index: int | None = None,
        stored: ObjectReference | None = None,
        value: Any = _NO_VALUE,
        store: Callable[[Any], ObjectReference] | None = None,
    ) -> None:
        self._future = future
        self._index = index
        self._stored = stored
        self._value = value
        self._store = store  #: stores a value in object storage (when a task's reference is pickled)

    def __repr__(self) -> str:
        if self._future is not None:
            task_id = getattr(self._future, "task_id", None)
            name = short_task_id(task_id) if isinstance(task_id, bytes) else "deferred call"
            index = "" if self._index is None else f"[{self._index}]"
            return f"ObjectRef(task {name}{index})"
        if self._stored is not None:
            return f"ObjectRef(stored {self._stored.object_id.hex()[:16]})"
        return "ObjectRef(value)"

    @property
    def task_future(self) -> concurrent.futures.Future[Any] | None:
        """The future of the task (or deferred call) whose result this is; None for a stored object or a value."""
        return self._future

    def is_task_result(self) -> bool:
        return self._future is not None

    def ready(self) -> bool:
        return self._future is None or self._future.done()

    def future(self) -> concurrent.futures.Future[Any]:
        """The reference as a `concurrent.futures.Future` of its value (Ray's `ObjectRef.future()`)."""
        if self._future is not None and self._index is None:
            return self._future
        wrapped: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            wrapped.set_result(self.get(None, self._session_reader()))
        except BaseException as error:
            wrapped.set_exception(error)
        return wrapped

    def __await__(self) -> Any:
        import asyncio

        read = self._session_reader()
        return asyncio.get_running_loop().run_in_executor(None, self.get, None, read).__await__()

    def _session_reader(self) -> Callable[[ObjectReference], Any] | None:
        """How the session reads a stored object (None when this is not one: nothing is read)."""
        if self._stored is None or self._future is not None or self._value is not _NO_VALUE:
            return None
        if session_reader is None:
            raise RuntimeError("scaler.compat.ray is not imported: a stored reference has no session to be read in")
        return session_reader()

    def hex(self) -> str:
        """An id of the reference, in hexadecimal (Ray's `ObjectRef.hex()`): its task's id (and index), or its
        stored object's id."""
        if self._stored is not None:
            return self._stored.object_id.hex()
        task_id = getattr(self._future, "task_id", None)
        if not isinstance(task_id, bytes):
            return f"{id(self):x}"
        return task_id.hex() if self._index is None else f"{task_id.hex()}{self._index:08x}"

    def get(self, timeout: float | None, read_stored: Callable[[ObjectReference], Any] | None = None) -> Any:
        """The value: waits for a task's result up to `timeout` seconds (GetTimeoutError after that)."""
        if self._future is not None:
            try:
                value = self._future.result(timeout)
            except concurrent.futures.TimeoutError as error:
                if self._future.done():  # the task itself raised a TimeoutError
                    raise as_ray_error(error) from None
                raise GetTimeoutError(f"ray.get timed out after {timeout} s waiting for {self!r}") from None
            except Exception as error:
                converted = as_ray_error(error)
                if converted is error:
                    raise
                raise converted from None
            if self._index is None:
                return value
            return value[self._index]
        if self._value is not _NO_VALUE:
            return self._value
        assert self._stored is not None and read_stored is not None
        return read_stored(self._stored)

    def argument(self, read_stored: Callable[[ObjectReference], Any]) -> Any:
        """What a task receives for this reference as a top-level argument (the task must be done)."""
        if self._stored is not None:
            return self._stored  # resolved by the worker, from object storage
        return self.get(None, read_stored)

    def __reduce__(self) -> tuple[Any, ...]:
        """Nested in an argument (or a result): a reference to the value in object storage."""
        if self._stored is not None:
            return (_rebuild, (self._stored,))
        if self._future is None:
            return (_rebuild, (self._value,))
        if self._store is None:
            raise TypeError(f"{self!r} cannot be passed inside another object: it has no client to store it with")
        try:
            value = self.get(None)
        except Exception as error:  # the task failed: the reference's ray.get raises its error where it arrives
            return (_rebuild_failed, (error,))
        self._stored = self._store(value)
        return (_rebuild, (self._stored,))


class ObjectRefGenerator:
    """What `.remote()` of a streaming generator gives (Ray's `ObjectRefGenerator`): iterating it (`for`, `next`,
    `async for`) gives an ObjectRef of each value the generator yielded, in order. Unlike Ray's, the references come
    once the task has run to its end (its values are not streamed back while it runs). A generator that raised gives,
    as Ray's, a reference per value it yielded before, then one whose `ray.get` raises its exception (only that one
    when its exception cannot be pickled: the task failed with it)."""

    def __init__(self, future: concurrent.futures.Future[Any], store: Callable[[Any], ObjectReference]) -> None:
        self._future = future
        self._store = store
        self._refs: list[ObjectRef] | None = None
        self._position = 0

    def __repr__(self) -> str:
        return f"ObjectRefGenerator({ObjectRef(self._future)!r})"

    @property
    def task_future(self) -> concurrent.futures.Future[Any]:
        """The future of the generator's task (its values as a list)."""
        return self._future

    def completed(self) -> ObjectRef:
        """A reference that is ready when the task is done (Ray's `ObjectRefGenerator.completed()`)."""
        return ObjectRef(self._future, store=self._store)

    def __iter__(self) -> ObjectRefGenerator:
        return self

    def __next__(self) -> ObjectRef:
        if self._refs is None:
            self._refs = self._references()
        if self._position >= len(self._refs):
            raise StopIteration
        self._position += 1
        return self._refs[self._position - 1]

    def __aiter__(self) -> ObjectRefGenerator:
        return self

    async def __anext__(self) -> ObjectRef:
        import asyncio

        if self._refs is None and not self._future.done():
            await asyncio.wait([asyncio.wrap_future(self._future)])  # done, whether it raised or not
        try:
            return next(self)
        except StopIteration:
            raise StopAsyncIteration from None

    def _references(self) -> list[ObjectRef]:
        try:
            values = self._future.result()
        except BaseException:  # the error, as the last reference (its get raises it)
            return [ObjectRef(self._future, store=self._store)]
        refs = [ObjectRef(self._future, index, store=self._store) for index in range(len(values))]
        if isinstance(values, StreamEnd):  # it raised after yielding these: a last reference raises its error
            failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
            failed.set_exception(values.error)
            refs.append(ObjectRef(failed))
        return refs


class StreamEnd(list):  # type: ignore[type-arg]
    """What a streaming generator's task returns when the generator raised after yielding values: those values, and
    the error."""

    def __init__(self, values: list[Any], error: BaseException) -> None:
        super().__init__(values)
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:
        return (StreamEnd, (list(self), self.error))


#: The most values `found_in` looks at in one call's arguments: past it, what is deeper is not looked into.
MOST_VALUES_LOOKED_AT = 10_000


def found_in(values: Any, kind: type[T]) -> list[T]:
    """The instances of `kind` in `values` and in the lists, tuples, sets and dicts inside it (not inside other
    objects), looking at no more than MOST_VALUES_LOOKED_AT values."""
    found: list[T] = []
    pending = [values]
    looked_at = 0
    while pending and looked_at < MOST_VALUES_LOOKED_AT:
        value = pending.pop()
        looked_at += 1
        if isinstance(value, kind):
            found.append(value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            pending.extend(itertools.islice(value, MOST_VALUES_LOOKED_AT - looked_at))
        elif isinstance(value, dict):
            pending.extend(itertools.islice(value.values(), MOST_VALUES_LOOKED_AT - looked_at))
    return found


def _rebuild(stored: Any) -> ObjectRef:
    """Inside a processor a storage reference unpickles as its object (the processor's resolver); elsewhere as the
    reference."""
    install_ray_api()
    if isinstance(stored, ObjectReference):
        return ObjectRef(stored=stored)
    return ObjectRef(value=stored)


def _rebuild_failed(error: BaseException) -> ObjectRef:
    """A reference to a task that failed: its `ray.get` raises the task's error."""
    install_ray_api()
    failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
    failed.set_exception(error)
    return ObjectRef(failed)


def install_ray_api() -> None:
    """Makes `ray` scaler.compat.ray in this process, where one of its objects is unpickled (a worker's processor):
    with Ray installed, the task's `ray.get` or `f.remote()` would otherwise be Ray's own, and start a Ray cluster."""
    importlib.import_module("scaler.compat.ray")


# ---------------------------------------------------------------- calls waiting for their arguments' tasks


Submit = Callable[[tuple[Any, ...], dict[str, Any]], concurrent.futures.Future[Any]]


@dataclass(eq=False)
class DeferredCall:
    """A remote call waiting for the tasks its top-level arguments name; `outer` is what its references wait on."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    submit: Submit  #: submits the call with resolved arguments; the task's future
    outer: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)
    waiting: int = 0
    inner: concurrent.futures.Future[Any] | None = None  #: the submitted task's future, once submitted
    #: done once the call was submitted, or will never be (cancelled, an argument's task failed): a later call that
    #: must follow it (an actor's calls keep their order) waits for this
    submitted: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    cancel_inner: Callable[[concurrent.futures.Future[Any]], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> None:
        """Ray's cancel: the submitted task is cancelled; a call not submitted yet never will be."""
        with self.lock:
            inner = self.inner
            if inner is None:
                _cancel_and_notify(self.outer)
                return
        if self.cancel_inner is not None:
            self.cancel_inner(inner)


#: deferred calls by their outer future's id, for ray.cancel (forgotten when the call is done)
_deferred_calls: dict[int, DeferredCall] = {}


def defer(deferred: DeferredCalls, call: DeferredCall, dependencies: Sequence[concurrent.futures.Future[Any]]) -> None:
    """Hand `call` to `deferred`, to be submitted once `dependencies` are done; `ray.cancel` finds it meanwhile."""
    future = call.outer
    _deferred_calls[id(future)] = call
    future.add_done_callback(lambda done: _deferred_calls.pop(id(done), None))
    deferred.add(call, dependencies)


def cancel_task(client: Any, future: concurrent.futures.Future[Any]) -> None:
    """A submitted call's cancel (`DeferredCall.cancel_inner`): its client cancels its task."""
    client.session.cancel_futures([future])


def deferred_call_of(future: concurrent.futures.Future[Any]) -> DeferredCall | None:
    """The deferred call whose references wait on `future`, while it is not done."""
    return _deferred_calls.get(id(future))


def unfinished_tasks(values: Sequence[Any]) -> list[concurrent.futures.Future[Any]]:
    """The futures of the unfinished tasks that a call's arguments name: as arguments, or nested in one (a nested
    reference travels as a reference, which pickling waits for: the call waits for its task too, without failing
    when it failed, since the task's own ray.get raises that; not the caller)."""
    unfinished = [
        task
        for value in values
        if isinstance(value, ObjectRef) and (task := value.task_future) is not None and not task.done()
    ]
    unfinished.extend(
        task
        for value in values
        if not isinstance(value, ObjectRef)
        for ref in found_in(value, ObjectRef)
        if (task := ref.task_future) is not None and not task.done()
    )
    return unfinished


class DeferredCalls:
    """Submits deferred calls from a thread of its own once their arguments' tasks are done, and settles each
    call's outer future from its task's (reading a result is blocking I/O, never done on the client's I/O thread,
    which runs the done callbacks)."""

    def __init__(self, read_stored: Callable[[ObjectReference], Any]) -> None:
        self._read_stored = read_stored
        self._events: queue.SimpleQueue[tuple[str, DeferredCall] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def add(self, call: DeferredCall, dependencies: Sequence[concurrent.futures.Future[Any]]) -> None:
        self._start()
        call.waiting = len(dependencies)
        for dependency in dependencies:
            dependency.add_done_callback(functools.partial(self._dependency_done, call))

    def close(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._events.put(None)
                self._thread = None

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="scaler-ray-deferred-calls", daemon=True)
                self._thread.start()

    def _dependency_done(self, call: DeferredCall, _future: concurrent.futures.Future[Any]) -> None:
        with call.lock:
            call.waiting -= 1
            ready = call.waiting == 0
        if ready:
            self._events.put(("submit", call))

    def _run(self) -> None:
        while (event := self._events.get()) is not None:
            kind, call = event
            if kind == "submit":
                self._submit(call)
            else:
                self._settle(call)

    def _submit(self, call: DeferredCall) -> None:
        try:
            self._submit_once(call)
        finally:
            call.submitted.set_result(None)

    def _submit_once(self, call: DeferredCall) -> None:
        if call.outer.done():  # cancelled before its arguments were ready
            return
        try:
            args = tuple(self._resolve(value) for value in call.args)
            kwargs = {key: self._resolve(value) for key, value in call.kwargs.items()}
            with call.lock:
                if call.outer.done():
                    return
                call.inner = call.submit(args, kwargs)
        except BaseException as error:  # an argument's task failed, or the call could not be submitted
            if not call.outer.done():
                call.outer.set_exception(error)
            return
        call.inner.add_done_callback(functools.partial(self._inner_done, call))

    def _inner_done(self, call: DeferredCall, _future: concurrent.futures.Future[Any]) -> None:
        self._events.put(("settle", call))

    def _resolve(self, value: Any) -> Any:
        return value.argument(self._read_stored) if isinstance(value, ObjectRef) else value

    @staticmethod
    def _settle(call: DeferredCall) -> None:
        assert call.inner is not None
        if call.outer.done():
            return
        try:
            call.outer.set_result(call.inner.result())
        except concurrent.futures.CancelledError:
            _cancel_and_notify(call.outer)
        except BaseException as error:
            call.outer.set_exception(error)


def _cancel_and_notify(future: concurrent.futures.Future[Any]) -> None:
    """Cancel a pending future and wake `wait`/`as_completed` callers (Future.cancel alone does not)."""
    if future.cancel():
        future.set_running_or_notify_cancel()
