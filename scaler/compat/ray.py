"""Ray's core API on scaler: `import scaler.compat.ray`, and code written for `ray` runs on a scaler cluster.

Supported: `ray.remote` on functions (`num_returns`; `num_gpus` and `resources` become capabilities; `num_cpus` is
accepted: a task has one processor), `.remote()`, `.options()`, `ray.get`, `ray.put`, `ray.wait`, `ray.cancel`,
`ray.init`, `ray.shutdown`, `ray.is_initialized`, `ray.util.as_completed`, `ray.util.map_unordered`, and
`scaler_init(address=None, n_workers=..., **combo_settings)`. Object references between tasks follow Ray's rule
(`ray_refs`). Anything else of Ray's API raises NotImplementedError naming it; never a silent no-op.

Without Ray installed, importing this module also makes `import ray` give this module. With Ray installed, it
patches the `ray` module in place (its `init` never starts a Ray cluster).

The first remote call without `ray.init`/`scaler_init` starts a local cluster (`SchedulerClusterCombo`) of one
worker per CPU, stopped by `ray.shutdown()`. Inside a task, calls go to the task's own scheduler.

Not supported, by design: actors (`@ray.remote` on a class). A Ray actor is a process that keeps an object and runs
its method calls in order; scaler's workers run independent tasks, and there is no channel from a client to one
running task through the scheduler. What to use instead is in the error.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import importlib
import inspect
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from scaler.client.client import Client
from scaler.client.future import ScalerFuture
from scaler.cluster.combo import SchedulerClusterCombo
from scaler.compat.ray_refs import DeferredCall, DeferredCalls, GetTimeoutError, ObjectRef
from scaler.payload import processor_context
from scaler.payload.references import ObjectReference
from scaler.payload.serializer import deserialize_frames

__all__ = [
    "GetTimeoutError",
    "ObjectRef",
    "cancel",
    "get",
    "init",
    "is_initialized",
    "put",
    "remote",
    "scaler_init",
    "shutdown",
    "util",
    "wait",
]

#: Settings of `scaler_init` that are the Client's, not the local cluster's.
CLIENT_SETTINGS = frozenset({"profiling", "timeout_seconds", "serializer", "stream_output"})
#: Options of `ray.init` that change nothing here and are accepted (they concern Ray's own logging and dashboard).
HARMLESS_INIT_OPTIONS = frozenset({"logging_level", "log_to_driver", "include_dashboard", "configure_logging"})

#: How long `scaler_init` waits for the workers of the local cluster it starts.
WORKERS_READY_SECONDS = 60.0

ACTORS_UNSUPPORTED = (
    "Ray actors (@ray.remote on a class) are not supported by scaler: a scaler task runs to completion and keeps no "
    "state between calls. Instead keep the state in the caller and pass it to each call (ray.put it once when it is "
    "large), or make one remote function that builds the object and runs the whole sequence of method calls."
)


@dataclass
class _Session:
    client: Client
    cluster: SchedulerClusterCombo | None  #: the local cluster this module started, stopped by shutdown()
    deferred: DeferredCalls


_session: _Session | None = None
_session_lock = threading.RLock()


# ---------------------------------------------------------------- starting and stopping


def scaler_init(address: str | None = None, *, n_workers: int | None = None, **settings: Any) -> None:
    """Connect to the scheduler at `address`, or start a local cluster of `n_workers` (default: one per CPU) with
    the other settings (`SchedulerClusterCombo`'s; `profiling`, `timeout_seconds`, `serializer`, `stream_output`
    go to the Client). RuntimeError when already initialized."""
    global _session
    with _session_lock:
        if _session is not None:
            raise RuntimeError("scaler.compat.ray is already initialized: call ray.shutdown() first")
        client_settings = {key: settings.pop(key) for key in list(settings) if key in CLIENT_SETTINGS}
        cluster = None
        if address is None:
            workers = n_workers if n_workers is not None else (os.cpu_count() or 1)
            cluster = SchedulerClusterCombo(n_workers=workers, **settings)
            address = cluster.get_address()
        elif settings or n_workers is not None:
            names = ", ".join(sorted([*settings, *(["n_workers"] if n_workers is not None else [])]))
            raise ValueError(f"scaler_init: {names} configure a local cluster; with an address none is started")
        try:
            client = Client(address=address, **client_settings)
            if cluster is not None:
                _wait_for_workers(client, workers)
        except BaseException:
            if cluster is not None:
                cluster.shutdown()
            raise
        _session = _Session(client, cluster, DeferredCalls(functools.partial(_read_stored, client)))


def _wait_for_workers(client: Client, workers: int) -> None:
    """As `ray.init()` returns with its local cluster's CPUs ready: the first calls then spread over every worker
    rather than queueing on the first one to connect."""
    deadline = time.monotonic() + WORKERS_READY_SECONDS
    while client._agent.worker_count < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the local cluster's {workers} workers did not connect in {WORKERS_READY_SECONDS:g} s")
        time.sleep(0.02)


def init(address: str | None = None, *, num_cpus: int | None = None, ignore_reinit_error: bool = False,
         **options: Any) -> None:  # fmt: skip
    """Ray's `init`: `address` None, "auto" or "local" starts a local cluster (`num_cpus` workers); a scaler
    address (tcp://host:port) connects to that scheduler."""
    unsupported = sorted(set(options) - HARMLESS_INIT_OPTIONS)
    if unsupported:
        raise NotImplementedError(f"ray.init({', '.join(unsupported)}=...) is not supported by scaler.compat.ray")
    if address is not None and address.startswith("ray://"):
        raise NotImplementedError("ray.init('ray://...') (Ray Client) is not supported: give a scaler address")
    with _session_lock:
        if _session is not None:
            if ignore_reinit_error:
                return
            raise RuntimeError("Maybe you called ray.init twice by accident? Call ray.shutdown() first.")
        local = address in (None, "auto", "local")
        scaler_init(None if local else address, n_workers=num_cpus if local else None)


def shutdown() -> None:
    """Disconnect, and stop the local cluster this module started (if it did)."""
    global _session
    with _session_lock:
        session, _session = _session, None
    if session is None:
        return
    session.deferred.close()
    session.client.disconnect()
    if session.cluster is not None:
        session.cluster.shutdown()


def is_initialized() -> bool:
    return _session is not None


def _current() -> _Session:
    """The session, started on first use: inside a task, a client of the task's scheduler; elsewhere a local
    cluster (as Ray starts one on the first remote call)."""
    global _session
    session = _session
    if session is not None:
        return session
    with _session_lock:
        if _session is None:
            if processor_context.current() is not None:
                client = Client()
                _session = _Session(client, None, DeferredCalls(functools.partial(_read_stored, client)))
            else:
                scaler_init()
        assert _session is not None
        return _session


def _read_stored(client: Client, reference: ObjectReference) -> Any:
    frames = client._storage().get_frames(reference.object_id)
    return deserialize_frames(client._serializer, frames)


# ---------------------------------------------------------------- remote functions


def remote(*args: Any, **options: Any) -> Any:
    """`@ray.remote`, `@ray.remote(num_returns=2, ...)` or `ray.remote(function)`."""
    if len(args) == 1 and callable(args[0]) and not options:
        return _make_remote(args[0], {})
    if args:
        raise TypeError("ray.remote takes a function, or keyword options only: @ray.remote(num_returns=2)")
    return lambda function: _make_remote(function, options)


def _make_remote(function: Any, options: dict[str, Any]) -> RemoteFunction:
    if isinstance(function, type):
        raise NotImplementedError(ACTORS_UNSUPPORTED)
    return RemoteFunction(function, options)


class RemoteFunction:
    """A function made remote: `.remote(*args, **kwargs)` submits a call, `.options(...)` changes options."""

    OPTIONS = frozenset({"num_returns", "num_cpus", "num_gpus", "resources", "name"})

    def __init__(self, function: Callable[..., Any], options: dict[str, Any]) -> None:
        unsupported = sorted(set(options) - self.OPTIONS)
        if unsupported:
            raise NotImplementedError(
                f"ray.remote option(s) {', '.join(unsupported)} are not supported by scaler.compat.ray "
                f"(supported: {', '.join(sorted(self.OPTIONS))})"
            )
        num_returns = options.get("num_returns", 1)
        if isinstance(num_returns, bool) or not isinstance(num_returns, int) or num_returns < 1:
            raise ValueError(f"num_returns must be an integer >= 1, not {num_returns!r} (streaming is not supported)")
        self._function = function
        self._options = dict(options)
        self._num_returns = num_returns
        self._capabilities = _capabilities(options)
        try:
            self._signature: inspect.Signature | None = inspect.signature(function)
        except (TypeError, ValueError):
            self._signature = None
        functools.update_wrapper(self, function)
        self._call = functools.partial(_call_remote, function, num_returns)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self._function, "__name__", "function")
        raise TypeError(
            f"Remote functions cannot be called directly. Instead of running '{name}()', try '{name}.remote()'."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (RemoteFunction, (self._function, self._options))

    def options(self, **options: Any) -> RemoteFunction:
        return RemoteFunction(self._function, {**self._options, **options})

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ray DAGs (.bind) are not supported by scaler.compat.ray: call .remote() instead")

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef | list[ObjectRef]:
        if self._signature is not None:
            self._signature.bind(*args, **kwargs)  # a TypeError here, as Ray raises it at the call
        session = _current()
        client = session.client
        unfinished = [
            value._future
            for value in (*args, *kwargs.values())
            if isinstance(value, ObjectRef) and value._future is not None and not value._future.done()
        ]
        submit = functools.partial(self._submit, client)
        future: concurrent.futures.Future[Any]
        if unfinished:
            call = DeferredCall(args, kwargs, submit, cancel_inner=functools.partial(_cancel_task, client))
            session.deferred.add(call, unfinished)
            future = call.outer
            _deferred_calls[id(future)] = call
            future.add_done_callback(lambda done: _deferred_calls.pop(id(done), None))
        else:
            read = functools.partial(_read_stored, client)
            args = tuple(value.argument(read) if isinstance(value, ObjectRef) else value for value in args)
            kwargs = {k: v.argument(read) if isinstance(v, ObjectRef) else v for k, v in kwargs.items()}
            future = submit(args, kwargs)
        store = client.send_object
        if self._num_returns == 1:
            return ObjectRef(future, store=store)
        return [ObjectRef(future, index, store=store) for index in range(self._num_returns)]

    def _submit(self, client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> concurrent.futures.Future[Any]:
        return client.submit_verbose(self._call, args, kwargs, capabilities=self._capabilities)


def _cancel_task(client: Client, future: concurrent.futures.Future[Any]) -> None:
    client._cancel_without_waiting([cast(ScalerFuture, future)])


#: deferred calls by their outer future's id, for ray.cancel (forgotten when the call is done)
_deferred_calls: dict[int, DeferredCall] = {}


def _capabilities(options: dict[str, Any]) -> dict[str, int] | None:
    capabilities = {name: int(amount) for name, amount in (options.get("resources") or {}).items()}
    if options.get("num_gpus"):
        capabilities["gpu"] = int(options["num_gpus"])
    return capabilities or None


def _call_remote(function: Callable[..., Any], num_returns: int, *args: Any, **kwargs: Any) -> Any:
    """Runs on a worker: the call, its result checked against `num_returns`."""
    result = function(*args, **kwargs)
    if num_returns > 1:
        try:
            count = len(result)
        except TypeError:
            raise ValueError(f"num_returns={num_returns}, but the task returned {type(result).__name__}") from None
        if count != num_returns:
            raise ValueError(f"Task returned {count} objects, but num_returns={num_returns}.")
    return result


# ---------------------------------------------------------------- references


def get(object_refs: ObjectRef | list[ObjectRef], *, timeout: float | None = None) -> Any:
    """The value of a reference, or the values of a list of references (in order)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    if isinstance(object_refs, ObjectRef):
        return _get_one(object_refs, deadline)
    if isinstance(object_refs, (list, tuple)) and all(isinstance(ref, ObjectRef) for ref in object_refs):
        return [_get_one(ref, deadline) for ref in object_refs]
    raise ValueError(f"'object_refs' must either be an ObjectRef or a list of ObjectRefs, not {object_refs!r}")


def _get_one(ref: ObjectRef, deadline: float | None) -> Any:
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    read = None if ref.is_task_result() else functools.partial(_read_stored, _current().client)
    return ref.get(remaining, read)


def put(value: Any) -> ObjectRef:
    """Store `value` once in object storage; tasks given the reference receive the value."""
    if isinstance(value, ObjectRef):
        raise TypeError("Calling 'put' on an ray.ObjectRef is not allowed.")
    return ObjectRef(stored=_current().client.send_object(value))


def wait(
    object_refs: list[ObjectRef], *, num_returns: int = 1, timeout: float | None = None, fetch_local: bool = True
) -> tuple[list[ObjectRef], list[ObjectRef]]:
    """(ready, not ready): at least `num_returns` ready references (at most that many listed as ready), or fewer
    when `timeout` seconds pass; each list keeps the input's order."""
    if not isinstance(object_refs, list) or not all(isinstance(ref, ObjectRef) for ref in object_refs):
        raise TypeError(f"wait() expected a list of ray.ObjectRef, got {type(object_refs).__name__}")
    if len({id(ref) for ref in object_refs}) != len(object_refs):
        raise ValueError("Wait requires a list of unique object refs.")
    wanted = len(object_refs) if num_returns is None else num_returns
    if wanted < 0 or wanted > len(object_refs):
        raise ValueError("Invalid number of objects to return: num_returns must be between 0 and the number of refs.")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pending = [ref._future for ref in object_refs if not ref.ready() and ref._future is not None]
        remaining = None if deadline is None else deadline - time.monotonic()
        if len(object_refs) - len(pending) >= wanted or (remaining is not None and remaining <= 0):
            break
        concurrent.futures.wait(pending, timeout=remaining, return_when=concurrent.futures.FIRST_COMPLETED)
    ready = [ref for ref in object_refs if ref.ready()][:wanted]
    chosen = {id(ref) for ref in ready}
    return ready, [ref for ref in object_refs if id(ref) not in chosen]


def cancel(object_ref: ObjectRef, *, force: bool = False, recursive: bool = True) -> None:
    """Cancel the task of a reference (at once: its `ray.get` then raises CancelledError)."""
    if not isinstance(object_ref, ObjectRef):
        raise TypeError(f"ray.cancel() only supported for object refs, not {type(object_ref).__name__}")
    future = object_ref._future
    if future is None or future.done():
        return
    deferred = _deferred_calls.get(id(future))
    if deferred is not None:
        deferred.cancel()
    else:
        _current().client._cancel_without_waiting([cast(ScalerFuture, future)])


def _as_completed(
    refs: Iterable[ObjectRef], *, chunk_size: int = 10, yield_obj_refs: bool = True, timeout: float | None = None,
    fetch_local: bool = True,
) -> Iterator[Any]:  # fmt: skip
    """Each reference as its task finishes (its value with `yield_obj_refs=False`). Ray yields values by default;
    the reference implementation, whose tests this module passes, yields references, and so does this one.
    `timeout`: TimeoutError when the next one takes longer. `chunk_size` is accepted: each is yielded at once."""
    if chunk_size < 1:
        raise ValueError("`chunk_size` must be >= 1")
    pending = list(refs)
    for ref in [ref for ref in pending if ref.ready()]:
        yield ref if yield_obj_refs else get(ref)
    waiting: dict[int, list[ObjectRef]] = {}
    for ref in pending:
        if not ref.ready() and ref._future is not None:
            waiting.setdefault(id(ref._future), []).append(ref)
    futures = [same[0]._future for same in waiting.values()]
    for future in concurrent.futures.as_completed(futures, timeout=timeout):  # type: ignore[arg-type]
        for ref in waiting[id(future)]:
            yield ref if yield_obj_refs else get(ref)


def _map_unordered(
    fn: RemoteFunction, items: Iterable[Any], *, backpressure_size: int | None = 100, chunk_size: int = 10,
    yield_obj_refs: bool = False, timeout: float | None = None,
) -> Iterator[Any]:  # fmt: skip
    """`fn.remote(item)` for each item, at most `backpressure_size` in flight; the results as they come."""
    if not isinstance(fn, RemoteFunction):
        raise TypeError("The function passed to map_unordered must be a @ray.remote function.")
    if fn._num_returns != 1:
        raise TypeError("map_unordered only supports remote functions with num_returns=1")
    if backpressure_size is not None and backpressure_size <= 0:
        raise ValueError("backpressure_size must be positive.")
    limit = backpressure_size or sys.maxsize
    in_flight: list[ObjectRef] = []
    for item in items:
        in_flight.append(fn.remote(item))  # type: ignore[arg-type]
        if len(in_flight) >= limit:
            ready, in_flight = wait(in_flight, num_returns=min(chunk_size, len(in_flight)), timeout=timeout)
            for ref in ready:
                yield ref if yield_obj_refs else get(ref)
    yield from _as_completed(in_flight, yield_obj_refs=yield_obj_refs, timeout=timeout)


# ---------------------------------------------------------------- the `ray` namespace


class _Unsupported:
    """Stands for a part of Ray's API that scaler does not offer: calling it, or any attribute of it, raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{self._name}() is not supported by scaler.compat.ray")

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise NotImplementedError(f"{self._name}.{attribute} is not supported by scaler.compat.ray")


#: Parts of Ray's API named here so that they raise NotImplementedError (with Ray installed, they replace Ray's).
UNSUPPORTED = (
    "actor", "method", "get_actor", "kill", "get_gpu_ids", "get_runtime_context", "runtime_context",
    "cross_language", "available_resources", "cluster_resources", "nodes", "timeline", "java_function",
    "cpp_function", "java_actor_class", "cpp_actor_class", "dag", "workflow", "data", "train", "tune", "serve",
)  # fmt: skip


def _unsupported_attribute(module: str) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        raise NotImplementedError(f"{module}.{name} is not supported by scaler.compat.ray")

    return __getattr__


util = types.ModuleType("ray.util", "Ray's utilities on scaler: as_completed and map_unordered.")
util.as_completed = _as_completed  # type: ignore[attr-defined]
util.map_unordered = _map_unordered  # type: ignore[attr-defined]
setattr(util, "__getattr__", _unsupported_attribute("ray.util"))  # noqa: B010 (a module-level __getattr__)
exceptions = types.ModuleType("ray.exceptions", "The errors of scaler.compat.ray that Ray's code names.")
exceptions.GetTimeoutError = GetTimeoutError  # type: ignore[attr-defined]
exceptions.TaskCancelledError = concurrent.futures.CancelledError  # type: ignore[attr-defined]

_API = {
    "remote": remote, "get": get, "put": put, "wait": wait, "cancel": cancel, "init": init, "shutdown": shutdown,
    "is_initialized": is_initialized, "ObjectRef": ObjectRef,
}  # fmt: skip


def __getattr__(name: str) -> Any:
    return _unsupported_attribute("ray")(name)


def _install() -> None:
    """Make `ray` this API: patch Ray when installed, else stand in for it."""
    this = sys.modules[__name__]
    try:
        real = sys.modules.get("ray") or importlib.import_module("ray")
    except ImportError:
        real = None
    for name in UNSUPPORTED:
        setattr(this, name, _Unsupported(f"ray.{name}"))
    if real is None or real is this:
        sys.modules["ray"] = this
        sys.modules["ray.util"] = util
        sys.modules["ray.exceptions"] = exceptions
        return
    for name, value in _API.items():
        setattr(real, name, value)
    for name in UNSUPPORTED:
        setattr(real, name, _Unsupported(f"ray.{name}"))
    real.util.as_completed = _as_completed
    real.util.map_unordered = _map_unordered
    worker = sys.modules.get("ray._private.worker")
    if worker is not None:  # Ray's own start-up and exit hooks must not start or stop a Ray cluster
        atexit.unregister(worker.shutdown)  # its shutdown at exit imports parts of Ray that name actors
        setattr(worker, "init", init)  # noqa: B010
        setattr(worker, "shutdown", lambda *args, **kwargs: None)  # noqa: B010


_install()
