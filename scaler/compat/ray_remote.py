"""`@ray.remote` functions on scaler: `RemoteFunction.remote()` submits a call through the session's client, deferring
it while its top-level arguments name unfinished tasks (ray_refs)."""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
import pickle
from collections.abc import Callable
from typing import Any

import cloudpickle

from scaler.client.client import Client
from scaler.compat import ray_options
from scaler.compat.ray_actors import ActorClass, pin_handles
from scaler.compat.ray_refs import (
    DeferredCall,
    ObjectRef,
    ObjectRefGenerator,
    StreamEnd,
    cancel_task,
    defer,
    install_ray_api,
    unfinished_tasks,
)
from scaler.compat.ray_runtime import TaskInfo, job_id_of_caller, running
from scaler.compat.ray_session import current, read_stored
from scaler.payload.serializer import DefaultSerializer
from scaler.payload.task_encoder import describe


def remote(*args: Any, **options: Any) -> Any:
    """`@ray.remote`, `@ray.remote(num_returns=2, ...)` or `ray.remote(function)`; on a class, an actor class
    (ray_actors)."""
    if len(args) == 1 and callable(args[0]) and not options:
        return _make_remote(args[0], {})
    if args or not options:  # Ray refuses `@ray.remote()` too: it needs a function, or options
        raise TypeError("ray.remote takes a function, or keyword options only: @ray.remote(num_returns=2)")
    return lambda function: _make_remote(function, options)


def _make_remote(function: Any, options: dict[str, Any]) -> RemoteFunction | ActorClass:
    if isinstance(function, type):
        return ActorClass(function, options)
    return RemoteFunction(function, options)


class RemoteFunction:
    """A function made remote: `.remote(*args, **kwargs)` submits a call, `.options(...)` changes options."""

    #: `max_retries`: Ray's retries of a task whose worker died; on scaler the scheduler retries a task whose worker
    #: was lost up to its own `--max-task-retries`, so any value is accepted and that bound applies. `max_calls`
    #: (Ray's limit on the calls a worker process runs before it is replaced) is accepted and checked as Ray checks it:
    #: scaler's processors are not replaced after a number of tasks
    OPTIONS = frozenset(
        {"num_returns", "num_cpus", "num_gpus", "resources", "name", "max_retries", "retry_exceptions", "max_calls"}
    )

    def __init__(self, function: Callable[..., Any], options: dict[str, Any]) -> None:
        ray_options.checked(options, self.OPTIONS, "ray.remote")
        max_retries = _whole_number(options, "max_retries", 3)
        if max_retries < -1:
            raise ValueError(f"max_retries must be an integer >= -1, not {max_retries!r}")
        retry = _retry_of(options.get("retry_exceptions", False), max_retries)
        if _whole_number(options, "max_calls", 0) < 0:
            raise ValueError(f"max_calls must be an integer >= 0, not {options['max_calls']!r}")
        num_returns = options.get("num_returns", 1)
        if num_returns is None or isinstance(num_returns, bool) or not isinstance(num_returns, (int, str)):
            raise TypeError(f"num_returns must be an integer or 'streaming', not {type(num_returns).__name__}")
        if num_returns == "dynamic":
            raise NotImplementedError(
                "ray.remote(num_returns='dynamic') is not supported by scaler.compat.ray: use num_returns='streaming' "
                "(what a generator function gets by default), whose .remote() gives an ObjectRefGenerator"
            )
        #: a generator function without num_returns streams, as in Ray: .remote() gives an ObjectRefGenerator
        self._streaming = num_returns == "streaming" or (
            "num_returns" not in options and inspect.isgeneratorfunction(function)
        )
        if self._streaming:
            num_returns = 1
        if not isinstance(num_returns, int) or num_returns < 0:
            raise ValueError(f"num_returns must be an integer >= 0 or 'streaming', not {num_returns!r}")
        self._function = function
        self._options = dict(options)
        self._num_returns = num_returns
        self._capabilities = _capabilities(options)
        try:
            self._signature: inspect.Signature | None = inspect.signature(function)
        except (TypeError, ValueError):
            self._signature = None
        functools.update_wrapper(self, function)
        self._returns = STREAMING if self._streaming else num_returns
        self._retry = retry
        #: the function a task runs, per job (the job is in what it tells the task: `ray_runtime.TaskInfo`); made once
        #: per job, so that the client stores it once
        self._calls: dict[str, Callable[..., Any]] = {}

    @property
    def num_returns(self) -> int:
        return self._num_returns

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self._function, "__name__", "function")
        raise TypeError(
            f"Remote functions cannot be called directly. Instead of running '{name}()', try '{name}.remote()'."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_remote_function, (self._function, self._options))

    def options(self, **options: Any) -> RemoteFunction:
        return RemoteFunction(self._function, {**self._options, **options})

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ray DAGs (.bind) are not supported by scaler.compat.ray: call .remote() instead")

    def _remote(
        self, args: Any = None, kwargs: dict[str, Any] | None = None, **options: Any
    ) -> ObjectRef | list[ObjectRef] | ObjectRefGenerator | None:
        """Ray's `f._remote(args=[...], kwargs={...}, **options)`: `f.options(**options).remote(*args, **kwargs)`."""
        function = self.options(**options) if options else self
        return function.remote(*(args or ()), **(kwargs or {}))

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef | list[ObjectRef] | ObjectRefGenerator | None:
        if self._signature is not None:
            self._signature.bind(*args, **kwargs)  # a TypeError here, as Ray raises it at the call
        session = current()
        client = session.client
        values = (*args, *kwargs.values())
        unfinished = unfinished_tasks(values)
        submit = functools.partial(self._submit, client)
        future: concurrent.futures.Future[Any]
        if unfinished:
            _check_picklable(client, args, kwargs)  # as an immediate call would, at the call
            call = DeferredCall(args, kwargs, submit, cancel_inner=functools.partial(cancel_task, client))
            defer(session.deferred, call, unfinished)
            future = call.outer
        else:
            read = functools.partial(read_stored, client)
            args = tuple(value.argument(read) if isinstance(value, ObjectRef) else value for value in args)
            kwargs = {k: v.argument(read) if isinstance(v, ObjectRef) else v for k, v in kwargs.items()}
            future = submit(args, kwargs)
        pin_handles(future, values)
        store = client.send_object
        if self._streaming:
            return ObjectRefGenerator(future, store)
        if self._num_returns == 0:  # the task runs; as in Ray, nothing refers to it
            return None
        if self._num_returns == 1:
            return ObjectRef(future, store=store)
        return [ObjectRef(future, index, store=store) for index in range(self._num_returns)]

    def _submit(self, client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> concurrent.futures.Future[Any]:
        return client.submit_verbose(self._call_for(job_id_of_caller()), args, kwargs, capabilities=self._capabilities)

    def _call_for(self, job_id: str) -> Callable[..., Any]:
        call = self._calls.get(job_id)
        if call is None:
            if not self._calls:  # once: Ray refuses a function that captured a large object
                name = f"{getattr(self._function, '__module__', '')}.{getattr(self._function, '__qualname__', '')}"
                ray_options.checked_size(self._function, f"The remote function {name}")
            options = self._options
            resources = {"CPU": float(options["num_cpus"]) if options.get("num_cpus") is not None else 1.0}
            if options.get("num_gpus"):
                resources["GPU"] = float(options["num_gpus"])
            resources.update({key: float(value) for key, value in (options.get("resources") or {}).items()})
            name = str(options.get("name") or getattr(self._function, "__qualname__", "function"))
            info = TaskInfo(job_id, resources, None, name)
            call = self._calls[job_id] = functools.partial(
                _call_remote, self._function, self._returns, self._retry, info
            )
        return call


def _rebuild_remote_function(function: Callable[..., Any], options: dict[str, Any]) -> RemoteFunction:
    install_ray_api()  # the task calling this function's .remote() may name `ray` for the rest
    return RemoteFunction(function, options)


class _ReferenceSkippingPickler(cloudpickle.Pickler):  # type: ignore[misc]
    """Pickles into nothing, leaving out the references: pickling a task's reference waits for its result."""

    def persistent_id(self, obj: Any) -> Any:
        return id(obj) if isinstance(obj, ObjectRef) else None


class _Discard:
    def write(self, data: bytes) -> int:
        return len(data)


def _check_picklable(client: Client, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """TypeError naming the first argument of a deferred call that cannot be pickled. Only for the default
    serializer (the one this check pickles with); a call with a serializer of the user's fails when submitted."""
    if not isinstance(client.session.serializer, DefaultSerializer):
        return
    named = [(f"argument {position}", value) for position, value in enumerate(args)]
    named.extend((f"keyword argument {keyword!r}", value) for keyword, value in kwargs.items())
    for which, value in named:
        if isinstance(value, ObjectRef):
            continue
        try:
            _ReferenceSkippingPickler(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        except Exception as error:
            raise TypeError(f"cannot serialize {which} of type {describe(value)}: {error}") from error


def _capabilities(options: dict[str, Any]) -> dict[str, int] | None:
    capabilities = {name: int(amount) for name, amount in (options.get("resources") or {}).items()}
    if options.get("num_gpus"):
        capabilities["gpu"] = int(options["num_gpus"])
    return capabilities or None


#: `_call_remote`'s `num_returns` of a streaming generator: the values it yields, as a list
STREAMING = -1


def _whole_number(options: dict[str, Any], name: str, default: int) -> int:
    """The option `name` (TypeError when it is not a whole number, as Ray's checks)."""
    value = options.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"The type of keyword '{name}' must be int or None, but received type {type(value).__name__}")
    return value


#: How a task that raised runs again (`retry_exceptions`): how many more times (-1: no limit), and the exception types
#: that do (an empty tuple: any exception); None: it does not.
Retry = tuple[int, tuple[type[BaseException], ...]] | None


def _retry_of(retry_exceptions: Any, max_retries: int) -> Retry:
    """Ray's `retry_exceptions`: False, True (any exception) or a list of exception types."""
    if retry_exceptions is False or retry_exceptions is None or max_retries == 0:
        return None
    if retry_exceptions is True:
        return (max_retries, ())
    if (
        isinstance(retry_exceptions, (list, tuple))
        and retry_exceptions
        and all(isinstance(kind, type) and issubclass(kind, BaseException) for kind in retry_exceptions)
    ):
        return (max_retries, tuple(retry_exceptions))
    raise TypeError(f"retry_exceptions must be True, False or a list of exception types, not {retry_exceptions!r}")


def _call_remote(
    function: Callable[..., Any], num_returns: int, retry: Retry, info: TaskInfo, *args: Any, **kwargs: Any
) -> Any:
    """Runs on a worker: the call (run again in this process when it raises an exception `retry` names, as Ray runs
    it again), its result checked against `num_returns` (a generator's values as a list for STREAMING, or as the
    `num_returns` values when it is more than one, as Ray's generators with a static `num_returns`). A streaming
    generator that raised after yielding gives its values and its error (`StreamEnd`), as Ray's gives a reference
    per value yielded, then one raising its error."""
    install_ray_api()  # the function's own `ray` (Ray's module, imported by name) is this API's in the task too
    retries_left = -1 if retry is None else retry[0]
    while True:
        try:
            with running(info):
                return _call_once(function, num_returns, *args, **kwargs)
        except Exception as error:
            if retry is None or retries_left == 0 or (retry[1] and not isinstance(error, retry[1])):
                raise
            retries_left -= 1


def _call_once(function: Callable[..., Any], num_returns: int, *args: Any, **kwargs: Any) -> Any:
    result = function(*args, **kwargs)
    if num_returns == 0:
        return None
    if num_returns == STREAMING:
        return _values_of(result)
    if num_returns > 1 and inspect.isgenerator(result):
        result = list(result)
    if num_returns > 1:
        try:
            count = len(result)
        except TypeError:
            raise ValueError(f"num_returns={num_returns}, but the task returned {type(result).__name__}") from None
        if count != num_returns:
            raise ValueError(f"Task returned {count} objects, but num_returns={num_returns}.")
    return result


def _values_of(generator: Any) -> list[Any]:
    """A streaming generator's values; when it raised after yielding some, those and its error (StreamEnd), unless
    the error cannot be pickled (then it is raised: the task fails with it)."""
    values: list[Any] = []
    try:
        for value in generator:
            values.append(value)
    except Exception as error:
        if not values:
            raise
        try:
            cloudpickle.dumps(error)
        except Exception:
            raise error from None
        return StreamEnd(values, error)
    return values
