"""Ray's core API on scaler: `import scaler.compat.ray`, and code written for `ray` runs on a scaler cluster.

Supported: `ray.remote` on functions (`num_returns`, and generator functions: `num_returns="streaming"`, their
default, gives an `ObjectRefGenerator`; `num_gpus` and `resources` become capabilities; `num_cpus` is
accepted: a task has one processor; `max_retries` is accepted: the scheduler's own retry bound applies),
and on classes (actors: `ray_actors`; `ray.method`, `ray.get_actor`, `ray.kill`),
`.remote()`, `.options()`, `ray.get` (a task's error raised as Ray raises it, `ray_errors`), `ray.put`, `ray.wait`,
`ray.cancel`, `ray.init` (its resources describe the local cluster, `ray_session.init`), `ray.shutdown`,
`ray.is_initialized`, `ray.ObjectRef` (and its older name `ray.ObjectID`), `ray.util.as_completed`,
`ray.util.map_unordered`, `ray.util.ActorPool` (`ray_actor_pool`), `ray.cluster_resources`,
`ray.available_resources`, `ray.nodes`, `ray.get_gpu_ids` and `ray.get_runtime_context` (`ray_runtime`: the
scheduler's view of its workers; the running task's ids and resources), and `scaler_init(address=None, n_workers=...,
**combo_settings)`. `ray.remote` options that only tune Ray's machinery are accepted with a warning, once; those that
would change results are refused by name (`ray_options`). Object references between tasks follow Ray's rule
(`ray_refs`). Anything else of Ray's API raises NotImplementedError naming it; never a silent no-op.

Without Ray installed, importing this module also makes `import ray` give this module. With Ray installed, it
patches the `ray` module in place (its `init` never starts a Ray cluster).

The first remote call without `ray.init`/`scaler_init` starts a local cluster (`SchedulerClusterCombo`) of one
worker per CPU, stopped by `ray.shutdown()` (`ray_session`). Inside a task, calls go to the task's own scheduler.
`ray_remote` holds the remote functions; this module the rest of the API and the `ray` namespace.

Actors are scaler's own (`Client.actor`, docs/guide/actors_and_streams.md) under Ray's names.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import importlib
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from scaler.compat.ray_actor_pool import ActorPool
from scaler.compat.ray_actors import get_actor, kill, method
from scaler.compat.ray_context import get_runtime_context
from scaler.compat.ray_errors import ActorDiedError, RayActorError, RayError, RayTaskError, TaskCancelledError
from scaler.compat.ray_refs import GetTimeoutError, ObjectRef, ObjectRefGenerator, deferred_call_of
from scaler.compat.ray_remote import RemoteFunction, remote
from scaler.compat.ray_runtime import available_resources, cluster_resources, get_gpu_ids, nodes
from scaler.compat.ray_session import current, init, is_initialized, scaler_init, shutdown
from scaler.compat.ray_waits import get, wait

__all__ = [
    "GetTimeoutError",
    "ObjectID",
    "ObjectRef",
    "ObjectRefGenerator",
    "available_resources",
    "cancel",
    "cluster_resources",
    "get",
    "get_actor",
    "get_gpu_ids",
    "get_runtime_context",
    "init",
    "is_initialized",
    "kill",
    "method",
    "nodes",
    "put",
    "remote",
    "scaler_init",
    "shutdown",
    "util",
    "wait",
]

# ---------------------------------------------------------------- references

#: Ray's older name of ObjectRef
ObjectID = ObjectRef


def put(value: Any) -> ObjectRef:
    """Store `value` once in object storage; tasks given the reference receive the value."""
    if isinstance(value, ObjectRef):
        raise TypeError("Calling 'put' on an ray.ObjectRef is not allowed.")
    return ObjectRef(stored=current().client.send_object(value))


def cancel(object_ref: ObjectRef | ObjectRefGenerator, *, force: bool = False, recursive: bool = True) -> None:
    """Cancel the task of a reference or of a streaming generator (at once: its `ray.get` then raises
    CancelledError)."""
    if isinstance(object_ref, ObjectRefGenerator):
        object_ref = object_ref.completed()
    if not isinstance(object_ref, ObjectRef):
        raise TypeError(f"ray.cancel() only supported for object refs, not {type(object_ref).__name__}")
    future = object_ref.task_future
    if future is None or future.done():
        return
    deferred = deferred_call_of(future)
    if deferred is not None:
        deferred.cancel()
    else:
        current().client.session.cancel_futures([future])


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
        if not ref.ready() and (future := ref.task_future) is not None:
            waiting.setdefault(id(future), []).append(ref)
    futures = [same[0].task_future for same in waiting.values()]
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
    if fn.num_returns != 1:
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
    "actor", "runtime_context", "cross_language", "timeline", "java_function", "cpp_function", "java_actor_class",
    "cpp_actor_class", "dag", "workflow", "data", "train", "tune", "serve",
)  # fmt: skip


def _unsupported_attribute(module: str) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        raise NotImplementedError(f"{module}.{name} is not supported by scaler.compat.ray")

    return __getattr__


util = types.ModuleType("ray.util", "Ray's utilities on scaler: as_completed, map_unordered and ActorPool.")
util.as_completed = _as_completed  # type: ignore[attr-defined]
util.map_unordered = _map_unordered  # type: ignore[attr-defined]
util.ActorPool = ActorPool  # type: ignore[attr-defined]
setattr(util, "__getattr__", _unsupported_attribute("ray.util"))  # noqa: B010 (a module-level __getattr__)
exceptions = types.ModuleType("ray.exceptions", "The errors of scaler.compat.ray that Ray's code names.")
exceptions.GetTimeoutError = GetTimeoutError  # type: ignore[attr-defined]
exceptions.RayError = RayError  # type: ignore[attr-defined]
exceptions.RayTaskError = RayTaskError  # type: ignore[attr-defined]
exceptions.TaskCancelledError = TaskCancelledError  # type: ignore[attr-defined]
exceptions.RayActorError = RayActorError  # type: ignore[attr-defined]
exceptions.ActorDiedError = ActorDiedError  # type: ignore[attr-defined]

_API = {
    "remote": remote, "get": get, "put": put, "wait": wait, "cancel": cancel, "init": init, "shutdown": shutdown,
    "is_initialized": is_initialized, "ObjectRef": ObjectRef, "ObjectID": ObjectRef,
    "ObjectRefGenerator": ObjectRefGenerator, "method": method,
    "get_actor": get_actor, "kill": kill, "cluster_resources": cluster_resources,
    "available_resources": available_resources, "nodes": nodes, "get_gpu_ids": get_gpu_ids,
    "get_runtime_context": get_runtime_context,
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
    if real is not None and real is not this and not hasattr(real, "remote"):
        real = None  # not Ray: a folder named `ray` on the path (an empty namespace package)
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
    real.util.ActorPool = ActorPool
    real.exceptions.RayTaskError = RayTaskError  # what ray.get raises here (ray_errors)
    real.exceptions.GetTimeoutError = GetTimeoutError
    real.exceptions.RayActorError = RayActorError  # what ray.get raises for a dead actor here
    real.exceptions.ActorDiedError = ActorDiedError
    worker = sys.modules.get("ray._private.worker")
    if worker is not None:  # Ray's own start-up and exit hooks must not start or stop a Ray cluster
        atexit.unregister(worker.shutdown)  # its shutdown at exit imports parts of Ray that name actors
        setattr(worker, "init", init)  # noqa: B010
        setattr(worker, "shutdown", lambda *args, **kwargs: None)  # noqa: B010


_install()
