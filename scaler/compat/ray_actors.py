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

import functools
from collections.abc import Callable
from typing import Any

from scaler.client.actors import ActorHandle
from scaler.compat.ray_refs import ObjectRef
from scaler.compat.ray_session import current, read_stored

#: Options of `@ray.remote` on a class, and of its `.options()`; those not listed raise NotImplementedError.
ACTOR_OPTIONS = frozenset(
    {"num_cpus", "num_gpus", "resources", "name", "max_restarts", "max_concurrency", "max_task_retries", "namespace",
     "lifetime", "get_if_exists", "memory"}
)  # fmt: skip
#: The classes made actor classes in this process, by qualified name: a handle found by name (`get_actor`) reads its
#: methods' `ray.method(num_returns=...)` there (a class not made here gives one reference per call).
_classes: dict[str, type] = {}
#: Options of a method's `.options()` and of `ray.method`.
METHOD_OPTIONS = frozenset({"num_returns"})


class ActorClass:
    """A class made remote: `.remote(*args, **kwargs)` starts an actor, `.options(...)` changes its options."""

    def __init__(self, cls: type, options: dict[str, Any]) -> None:
        unsupported = sorted(set(options) - ACTOR_OPTIONS)
        if unsupported:
            raise NotImplementedError(
                f"ray.remote option(s) {', '.join(unsupported)} on an actor class are not supported by "
                f"scaler.compat.ray (supported: {', '.join(sorted(ACTOR_OPTIONS))})"
            )
        if options.get("lifetime") not in (None, "non_detached"):
            raise NotImplementedError(
                "detached actors (lifetime='detached') are not supported by scaler.compat.ray: an actor ends with "
                "the client that started it"
            )
        self._cls = cls
        self._options = dict(options)
        _classes[cls.__qualname__] = cls
        functools.update_wrapper(self, cls, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = self._cls.__name__
        raise TypeError(f"Actors cannot be instantiated directly. Instead of '{name}()', use '{name}.remote()'.")

    def options(self, **options: Any) -> ActorClass:
        return ActorClass(self._cls, {**self._options, **options})

    def bind(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ray DAGs (.bind) are not supported by scaler.compat.ray: call .remote() instead")

    def remote(self, *args: Any, **kwargs: Any) -> RayActorHandle:
        options, client = self._options, current().client
        name = options.get("name")
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
        read = functools.partial(read_stored, client)
        args = tuple(_argument(value, read) for value in args)
        kwargs = {key: _argument(value, read) for key, value in kwargs.items()}
        handle: ActorHandle[Any] = client.actor_verbose(
            self._cls, args, kwargs, max_restarts=int(options.get("max_restarts", 0)),
            max_concurrency=int(options.get("max_concurrency", 1)), name=name, capabilities=_capabilities(options),
        )  # fmt: skip
        return RayActorHandle(handle, self._cls)


class RayActorHandle:
    """Ray's ActorHandle: `handle.method.remote(...)` is an ObjectRef of the call (see the module docstring)."""

    def __init__(self, handle: ActorHandle[Any], cls: type | None) -> None:
        self._handle = handle
        self._cls = cls

    @property
    def scaler_handle(self) -> ActorHandle[Any]:
        return self._handle

    def __repr__(self) -> str:
        return f"Actor({self._handle.class_name}, {self._handle.actor_id.hex()[:16]})"

    def __getattr__(self, name: str) -> ActorMethod:
        if name == "__ray_terminate__":
            return ActorMethod(self, name, 1)
        if name.startswith("_"):
            raise AttributeError(name)
        getattr(self._handle, name)  # AttributeError naming the methods, for a name the class does not have
        method = getattr(self._cls, name, None) if self._cls is not None else None
        return ActorMethod(self, name, int(getattr(method, "__ray_num_returns__", 1)))

    def __reduce__(self) -> Any:
        """Passed to a task, the handle calls the same actor from there (Ray's "passing around actor handles")."""
        return (RayActorHandle, (self._handle, self._cls))

    def kill(self) -> None:
        """End the actor now (ray.kill): the start task is cancelled; the calls not done fail."""
        started = self._handle.started
        if started is not None:
            started.cancel()
        else:
            self._handle.stop()


class ActorMethod:
    """`handle.method`: `.remote(...)` calls it, `.options(num_returns=...)` changes how many refs it gives."""

    def __init__(self, actor: RayActorHandle, name: str, num_returns: int) -> None:
        self._actor, self._name, self._num_returns = actor, name, num_returns

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

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef | list[ObjectRef]:
        handle = self._actor.scaler_handle
        if self._name == "__ray_terminate__":
            handle.stop()
            started = handle.started
            return ObjectRef(started) if started is not None else ObjectRef(value=None)
        client = current().client
        read = functools.partial(read_stored, client)
        args = tuple(_argument(value, read) for value in args)
        kwargs = {key: _argument(value, read) for key, value in kwargs.items()}
        future = handle.call(self._name, args, kwargs)
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
    """The live actor named `name` (ValueError when none, as Ray)."""
    try:
        handle = current().client.get_actor(name)
    except ValueError as error:
        raise ValueError(f"Failed to look up actor with name '{name}'. {error}") from None
    return RayActorHandle(handle, _classes.get(handle.class_name))


def kill(actor: RayActorHandle, *, no_restart: bool = True) -> None:
    """End the actor at once (its calls not done fail); it is never restarted."""
    if not isinstance(actor, RayActorHandle):
        raise ValueError(f"ray.kill() only supported for actors. For tasks, try ray.cancel(). Got: {actor!r}")
    actor.kill()


def _num_returns(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"num_returns must be an integer >= 1, not {value!r}")
    return value


def _argument(value: Any, read: Callable[[Any], Any]) -> Any:
    """A top-level ObjectRef argument is its value (waited for here: calls keep their order)."""
    return value.argument(read) if isinstance(value, ObjectRef) else value


def _capabilities(options: dict[str, Any]) -> dict[str, int] | None:
    capabilities = {name: int(amount) for name, amount in (options.get("resources") or {}).items()}
    if options.get("num_gpus"):
        capabilities["gpu"] = int(options["num_gpus"])
    return capabilities or None
