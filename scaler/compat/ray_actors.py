"""Ray's actors on scaler (`@ray.remote` on a class): `Cls.remote(...)` starts an actor (`Client.actor`), its
methods' `.remote(...)` give ObjectRefs of their calls, `.options(name=..., max_restarts=..., max_concurrency=...,
num_returns=...)`, `ray.method(num_returns=...)`, `ray.get_actor(name)`, `ray.kill(handle)` and
`handle.__ray_terminate__.remote()`.

As in Ray: an actor is restarted after its worker dies only when `max_restarts` says so (default 0; -1: always),
the calls at it then fail (`ray.exceptions.RayActorError`, here `ActorRestartedError` / `ActorDiedError`); an
anonymous actor ends when its last handle is collected, a named one when it is killed or its client leaves;
`ray.kill` ends it at once (the calls not done fail), `__ray_terminate__` after the calls made before.
"""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from scaler.client.actors import ActorHandle, interface_of, spec_of
from scaler.client.client import actor_handle_in_task
from scaler.client.session import TaskOptions
from scaler.compat import ray_options
from scaler.compat.ray_errors import ActorDiedError
from scaler.compat.ray_refs import (
    DeferredCall,
    ObjectRef,
    Submit,
    cancel_task,
    defer,
    found_in,
    install_ray_api,
    unfinished_tasks,
)
from scaler.compat.ray_runtime import TaskInfo, hold_actor, job_id_of_caller
from scaler.compat.ray_session import current, read_stored
from scaler.payload import processor_context
from scaler.payload.actor_method import has_async_methods
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

#: Options of `@ray.remote` on a class, and of its `.options()`; those not listed raise NotImplementedError.
ACTOR_OPTIONS = frozenset(
    {"num_cpus", "num_gpus", "resources", "name", "max_restarts", "max_concurrency", "max_task_retries", "namespace",
     "lifetime", "get_if_exists"}
)  # fmt: skip
#: The classes made actor classes in this process, by qualified name: a handle found by name (`get_actor`) reads its
#: methods' `ray.method(num_returns=...)` there (a class not made here gives one reference per call).
_classes: dict[str, type] = {}
#: Options of a method's `.options()` and of `ray.method` (`name` labels a call in Ray's dashboard: accepted).
METHOD_OPTIONS = frozenset({"num_returns", "name"})
#: Ray's default `max_concurrency` of an actor whose class has `async def` methods (an "async actor").
ASYNC_MAX_CONCURRENCY = 1000


class ActorClass:
    """A class made remote: `.remote(*args, **kwargs)` starts an actor, `.options(...)` changes its options."""

    def __init__(self, cls: type, options: dict[str, Any]) -> None:
        ray_options.checked(options, ACTOR_OPTIONS, "ray.remote (actor class)")
        if options.get("lifetime") not in (None, "non_detached"):
            raise NotImplementedError(
                "detached actors (lifetime='detached') are not supported by scaler.compat.ray: an actor ends with "
                "the client that started it"
            )
        for option in ("max_restarts", "max_task_retries", "max_concurrency"):
            value = options.get(option)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"The type of keyword '{option}' must be int or None, but received {value!r}")
            if option != "max_concurrency" and value is not None and value < -1:
                raise ValueError(f"The keyword '{option}' only accepts None, 0, -1 or a positive integer")
        self._cls = cls
        self._options = dict(options)
        self._size_checked = False
        _classes[cls.__qualname__] = cls
        functools.update_wrapper(self, cls, updated=())
        try:
            self._init_signature: inspect.Signature | None = inspect.signature(cls)
        except (TypeError, ValueError):
            self._init_signature = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = self._cls.__name__
        raise TypeError(f"Actors cannot be instantiated directly. Instead of '{name}()', use '{name}.remote()'.")

    def __getattr__(self, name: str) -> Any:
        """The class's own attributes (class variables, static and class methods), as Ray's actor class keeps them."""
        cls = self.__dict__.get("_cls")
        if cls is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(cls, name)

    def __dir__(self) -> list[str]:
        return sorted({*(name for name in dir(self._cls) if not name.startswith("_")), "options", "remote"})

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        raise TypeError(
            "Inheriting from actor classes is not currently supported. You can instead inherit from a non-actor "
            f"base class and make the derived class an actor class (with @ray.remote); {self._cls.__name__} is one."
        )

    def options(self, **options: Any) -> ActorClass:
        return ActorClass(self._cls, {**self._options, **options})

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ray DAGs (.bind) are not supported by scaler.compat.ray: call .remote() instead")

    def _remote(self, args: Any = None, kwargs: dict[str, Any] | None = None, **options: Any) -> RayActorHandle:
        """Ray's `Cls._remote(args=[...], kwargs={...}, **options)`: `Cls.options(**options).remote(...)`."""
        actor_class = self.options(**options) if options else self
        return actor_class.remote(*(args or ()), **(kwargs or {}))

    def remote(self, *args: Any, **kwargs: Any) -> RayActorHandle:
        if self._init_signature is not None:
            self._init_signature.bind(*args, **kwargs)  # a TypeError here, as Ray raises it at the call
        if not self._size_checked:  # once: Ray refuses a class that captured a large object
            ray_options.checked_size(self._cls, f"The actor {self._cls.__name__}")
            self._size_checked = True
        options, client = self._options, current().client
        name = _scoped(options["name"], options.get("namespace")) if options.get("name") else None
        if name:
            try:
                existing = client.get_actor(name)
            except ValueError:
                existing = None
            if existing is not None and options.get("get_if_exists"):
                return RayActorHandle(existing, self._cls)
            if existing is not None:  # Ray refuses at the call; the start would fail only in the actor's calls
                raise ValueError(
                    f"The name {name} is already taken. Please use a different name or get the existing actor using "
                    f"ray.get_actor({name!r})"
                )
        concurrency = options.get("max_concurrency")
        if concurrency is None:  # Ray's default: one call at a time, or 1000 for an async actor
            concurrency = ASYNC_MAX_CONCURRENCY if has_async_methods(self._cls) else 1
        restarts = int(options.get("max_restarts") or 0)
        # as Ray: `.remote()` returns at once, the actor starts once its arguments' tasks are done; a named one is
        # started before `.remote()` returns, so that its name is found (and taken) from then on
        unfinished = unfinished_tasks((*args, *kwargs.values())) if not name else []
        if unfinished:
            return self._start_later(args, kwargs, spec_of(self._cls, restarts, concurrency, name or None), unfinished)
        read = functools.partial(read_stored, client)
        args = tuple(_argument(value, read) for value in args)
        kwargs = {key: _argument(value, read) for key, value in kwargs.items()}
        spec = spec_of(self._cls, restarts, concurrency, name or None)
        handle: ActorHandle[Any] = ActorHandle.start(
            client.session, self._builder(name or ""), args, kwargs, spec, TaskOptions.of(None, _capabilities(options)),
            actor_handle_in_task,
        )  # fmt: skip
        actor = RayActorHandle(handle, self._cls)
        actor.keep(found_in((args, kwargs), RayActorHandle))  # the handles it was given live as long as it
        return actor

    def _builder(self, name: str) -> Any:
        """What the actor's start task calls to build it: the class, telling the processor it holds this actor
        (`ray_runtime`: its id, name and resources for `ray.get_runtime_context()`)."""
        resources = {"CPU": float(self._options["num_cpus"])} if self._options.get("num_cpus") else {}
        if self._options.get("num_gpus"):
            resources["GPU"] = float(self._options["num_gpus"])
        resources.update({key: float(value) for key, value in (self._options.get("resources") or {}).items()})
        info = TaskInfo(job_id_of_caller(), resources, name, self._cls.__qualname__)
        return ActorBuilder(self._cls, info)

    def _start_later(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], spec: m.ActorSpec,
        unfinished: list[concurrent.futures.Future[Any]],
    ) -> RayActorHandle:  # fmt: skip
        """A handle at once; the actor's start is a deferred call (`ray_refs`), its calls follow (`send_in_order`)."""
        session = current()
        options = TaskOptions.of(None, _capabilities(self._options))
        handle: ActorHandle[Any] = ActorHandle.start_later(
            session.client.session, self._builder(""), spec, options, actor_handle_in_task
        )
        actor = RayActorHandle(handle, self._cls)
        actor.keep(found_in((args, kwargs), RayActorHandle))
        actor.start_later(session, handle.begin, args, kwargs, unfinished)
        return actor


class RayActorHandle:
    """Ray's ActorHandle: `handle.method.remote(...)` is an ObjectRef of the call (see the module docstring)."""

    def __init__(self, handle: ActorHandle[Any], cls: type | None) -> None:
        self._handle = handle
        self._cls = cls
        self._kept: list[RayActorHandle] = []
        #: the latest call that waits for its arguments' tasks: the calls after it follow it (`send_in_order`)
        self._last_deferred: DeferredCall | None = None
        self._order_lock = threading.Lock()
        #: the actor's start, when it waited for its arguments' tasks (`ActorClass.remote`)
        self._start: DeferredCall | None = None

    @property
    def scaler_handle(self) -> ActorHandle[Any]:
        return self._handle

    @property
    def _actor_id(self) -> TaskID:
        """The actor's id (Ray's `handle._actor_id`)."""
        return self._handle.actor_id

    @property
    def scaler_actor_class(self) -> type | None:
        """The class the actor is an instance of, when this process has it (a handle found by name may not)."""
        return self._cls

    def start_later(
        self, session: Any, begin: Submit, args: tuple[Any, ...], kwargs: dict[str, Any],
        unfinished: list[concurrent.futures.Future[Any]],
    ) -> None:  # fmt: skip
        """The actor starts (`begin(args, kwargs)`) once its arguments' tasks are done; every call follows it."""
        call = DeferredCall(args, kwargs, begin, cancel_inner=functools.partial(cancel_task, session.client))
        with self._order_lock:
            self._start = self._last_deferred = call
        defer(session.deferred, call, unfinished)

    def send_in_order(
        self, session: Any, send: Submit, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> concurrent.futures.Future[Any]:
        """Send a call (`send(args, kwargs)`), its reference arguments resolved: at once when they are ready and no
        earlier call of this handle still waits for its own; otherwise, as Ray, `.remote()` returns at once and the
        call is sent once they are ready, after the calls made before it (an actor runs one caller's calls in the
        order they were made). A call after a start that failed (an argument's task failed) raises ActorDiedError
        naming why, as Ray's calls to an actor whose creation failed."""
        if self._start is not None:
            send = functools.partial(self._after_start, send)
        unfinished = unfinished_tasks((*args, *kwargs.values()))
        with self._order_lock:
            before = self._last_deferred
            if before is not None and before.submitted.done():
                before = None
            if not unfinished and before is None:
                read = functools.partial(read_stored, session.client)
                args = tuple(_argument(value, read) for value in args)
                kwargs = {key: _argument(value, read) for key, value in kwargs.items()}
                return send(args, kwargs)
            call = DeferredCall(args, kwargs, send, cancel_inner=functools.partial(cancel_task, session.client))
            self._last_deferred = call
            defer(session.deferred, call, [*unfinished, *([before.submitted] if before is not None else [])])
            return call.outer

    def _after_start(self, send: Submit, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        start = self._start
        if start is not None and start.outer.done() and not start.outer.cancelled() and start.inner is None:
            error = start.outer.exception()
            raise ActorDiedError(f"the actor {self._handle.class_name} was never built: its start failed: {error}")
        return send(args, kwargs)

    def keep(self, handles: list[RayActorHandle]) -> None:
        """Keep other actors' handles alive as long as this one: Ray keeps an actor alive while a handle on it lives
        anywhere, and this actor was given these (an anonymous actor ends when its starting handle is collected)."""
        self._kept.extend(handle for handle in handles if handle is not self)

    def __repr__(self) -> str:
        return f"Actor({self._handle.class_name}, {self._handle.actor_id.hex()[:16]})"

    def __dir__(self) -> list[str]:
        """The actor's methods, as Ray's handle lists them."""
        return sorted({*self._handle.methods, "__init__", "__ray_terminate__"} - {""})

    def __getattr__(self, name: str) -> ActorMethod:
        if name == "__ray_terminate__":
            return ActorMethod(self, name, 1)
        if name.startswith("_"):
            raise AttributeError(name)
        getattr(self._handle, name)  # AttributeError naming the methods, for a name the class does not have
        method = getattr(self._cls, name, None) if self._cls is not None else None
        return ActorMethod(self, name, int(getattr(method, "__ray_num_returns__", 1)))

    def __reduce__(self) -> Any:
        """Passed to a task, the handle calls the same actor from there (Ray's "passing around actor handles");
        returned by a task, it calls it from the driver."""
        handle = self._handle
        methods = tuple(sorted(handle.methods))
        return (_rebuild_handle, (handle.actor_id, handle.class_name, methods, self._cls))

    def kill(self) -> None:
        """End the actor now (ray.kill): the start task is cancelled (one still waiting for its arguments is never
        sent); the calls not done fail."""
        if self._start is not None and self._start.inner is None:
            self._start.cancel()
        started = self._handle.started
        if started is not None:
            started.cancel()
        else:
            self._handle.stop()


class ActorMethod:
    """`handle.method`: `.remote(...)` calls it, `.options(num_returns=...)` changes how many refs it gives."""

    def __init__(self, actor: RayActorHandle, name: str, num_returns: int) -> None:
        self._actor, self._name, self._num_returns = actor, name, num_returns
        self._signature = _method_signature(actor.scaler_actor_class, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"Actor methods cannot be called directly. Instead of running 'object.{self._name}()', try "
            f"'object.{self._name}.remote()'."
        )

    def options(self, **options: Any) -> ActorMethod:
        unsupported = sorted(set(options) - METHOD_OPTIONS)
        if unsupported:
            raise NotImplementedError(f"actor method option(s) {', '.join(unsupported)} are not supported")
        return ActorMethod(self._actor, self._name, _num_returns(options.get("num_returns", self._num_returns)))

    def _remote(self, args: Any = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Ray's `handle.method._remote(args=[...], kwargs={...}, **options)`."""
        method = self.options(**options) if options else self
        return method.remote(*(args or ()), **(kwargs or {}))

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef | list[ObjectRef]:
        handle = self._actor.scaler_handle
        if self._signature is not None:
            self._signature.bind(*args, **kwargs)  # a TypeError here, as Ray raises it at the call
        if self._name == "__ray_terminate__":  # after the calls made before it, those that wait included
            return ObjectRef(self._actor.send_in_order(current(), lambda _args, _kwargs: _stop(handle), (), {}))
        session = current()
        client = session.client
        self._actor.keep(found_in((args, kwargs), RayActorHandle))
        future = self._actor.send_in_order(session, functools.partial(handle.call, self._name), args, kwargs)
        store = client.send_object
        if self._num_returns == 1:
            return ObjectRef(future, store=store)
        return [ObjectRef(future, index, store=store) for index in range(self._num_returns)]


def method(*args: Any, **options: Any) -> Any:
    """`@ray.method(num_returns=2)` on an actor's method."""
    if args or set(options) - METHOD_OPTIONS:
        raise TypeError("ray.method takes keyword options only: @ray.method(num_returns=2)")
    num_returns = _num_returns(options.get("num_returns", 1))

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        function.__ray_num_returns__ = num_returns  # type: ignore[attr-defined]
        return function

    return mark


def get_actor(name: str, namespace: str | None = None) -> RayActorHandle:
    """The live actor named `name` in `namespace` (ValueError when none, as Ray)."""
    if not isinstance(name, str) or not name:
        raise ValueError("Please supply a non-empty value to get_actor")
    try:
        handle = current().client.get_actor(_scoped(name, namespace))
    except ValueError as error:
        raise ValueError(f"Failed to look up actor with name '{name}'. {error}") from None
    return RayActorHandle(handle, _classes.get(handle.class_name))


def kill(actor: RayActorHandle, *, no_restart: bool = True) -> None:
    """End the actor at once (its calls not done fail); it is never restarted."""
    if not isinstance(actor, RayActorHandle):
        raise ValueError(f"ray.kill() only supported for actors. For tasks, try ray.cancel(). Got: {actor!r}")
    actor.kill()


def _scoped(name: str, namespace: str | None) -> str:
    """The scaler name of Ray's actor `name` in `namespace` (Ray's names are unique within a namespace; actors given
    none share one namespace here)."""
    if not namespace:
        return name
    return f"{namespace}::{name}"


def _method_signature(cls: type | None, name: str) -> inspect.Signature | None:
    """The signature a call of the method `name` must bind to (without `self`); None when it is not known."""
    if cls is None:
        return None
    try:
        static = inspect.getattr_static(cls, name)
        signature = inspect.signature(getattr(cls, name))
    except (AttributeError, TypeError, ValueError):
        return None
    if isinstance(static, (staticmethod, classmethod)) or not inspect.isfunction(static):
        return signature
    parameters = list(signature.parameters.values())
    if not parameters or parameters[0].kind not in (parameters[0].POSITIONAL_ONLY, parameters[0].POSITIONAL_OR_KEYWORD):
        return None
    return signature.replace(parameters=parameters[1:])


def _rebuild_handle(actor_id: TaskID, class_name: str, methods: tuple[str, ...], cls: type | None) -> RayActorHandle:
    """A handle unpickled in a task calls through the task's client; elsewhere (returned to the driver) through the
    session's. Either way it does not stop the actor when collected."""
    from scaler.client.client import actor_handle_in_task

    if processor_context.current() is not None:
        handle = actor_handle_in_task(actor_id, class_name, methods)
    else:
        session = current().client.session
        handle = ActorHandle(session, actor_id, class_name, frozenset(methods), None, actor_handle_in_task, owned=False)
    return RayActorHandle(handle, cls)


class ActorBuilder:
    """Builds a Ray actor on its worker (the start task's function): the processor notes it holds this actor
    (`ray_runtime.hold_actor`), then the class is called. It has the class's names and signature, so that the start
    task is named and checked after the class."""

    def __init__(self, cls: type, info: TaskInfo) -> None:
        self.cls = cls
        self.info = info
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__
        try:
            self.__signature__ = inspect.signature(cls)
        except (TypeError, ValueError):
            pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        install_ray_api()  # the class's own `ray` (Ray's module, imported by name) is this API's in the actor too
        _held_class[:] = [self.cls]
        hold_actor(self.info)
        return self.cls(*args, **kwargs)


#: the class of the actor this processor holds (`ActorBuilder`), for `ray.get_runtime_context().current_actor`
_held_class: list[type] = []


def handle_of_running_actor(actor_id: bytes) -> RayActorHandle:
    """A handle on the actor the caller runs in (Ray's `get_runtime_context().current_actor`)."""
    cls = _held_class[0] if _held_class else None
    if cls is None:
        raise RuntimeError("This method is only available in an actor.")
    methods = tuple(interface_of(cls).decode().split("\n"))
    return _rebuild_handle(TaskID(actor_id), cls.__qualname__, methods, cls)


def pin_handles(future: concurrent.futures.Future[Any], values: Any) -> None:
    """Keep the actor handles among a task's arguments alive until the task is done (Ray keeps an actor alive while
    a handle on it lives anywhere; an anonymous actor here ends when its starting handle is collected)."""
    handles = found_in(values, RayActorHandle)
    if handles:
        _pinned[id(future)] = handles
        future.add_done_callback(lambda done: _pinned.pop(id(done), None))


#: the actor handles given to unfinished tasks, by the id of the task's future
_pinned: dict[int, list[RayActorHandle]] = {}


def _num_returns(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"num_returns must be an integer >= 1, not {value!r}")
    return value


def _stop(handle: ActorHandle[Any]) -> concurrent.futures.Future[Any]:
    """Stop the actor after its calls sent so far; what `__ray_terminate__`'s reference waits on."""
    handle.stop()
    if handle.started is not None:
        return handle.started
    stopped: concurrent.futures.Future[Any] = concurrent.futures.Future()
    stopped.set_result(None)
    return stopped


def _argument(value: Any, read: Callable[[Any], Any]) -> Any:
    """A top-level ObjectRef argument is its value (its task is done, or the call is deferred until it is)."""
    return value.argument(read) if isinstance(value, ObjectRef) else value


def _capabilities(options: dict[str, Any]) -> dict[str, int] | None:
    capabilities = {name: int(amount) for name, amount in (options.get("resources") or {}).items()}
    if options.get("num_gpus"):
        capabilities["gpu"] = int(options["num_gpus"])
    return capabilities or None
