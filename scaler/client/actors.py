"""Actors on the client's side (`Client.actor`): a handle on an instance of a class that lives on one worker.

`client.actor(Cls, *args, **kwargs)` starts the actor (its start task: `Cls(*args, **kwargs)` built on a worker
chosen by capabilities) and returns an `ActorHandle` at once; `handle.method(*args, **kwargs)` is a future of that
method's call on the instance. Calls run one at a time, in the order they were made (`max_concurrency` > 1: up to
that many at once), and the instance keeps its state between them. Calls made before the actor is built wait for it
at the scheduler. When the actor's worker dies, the calls that were at it fail with `ActorRestartedError` and the
actor is built again elsewhere (up to `max_restarts` times; then it and its calls end with `ActorDiedError`).

An actor ends when `handle.stop()` is called (after the calls made before it), when the handle that started it is
garbage collected (an anonymous actor's only), or when its client leaves. A handle sent to a task calls the actor
from there. The protocol's side, and the scheduler's,
are in `scheduler/core/actors.py`; the worker's in `worker/actors.py`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from scaler.client.future import ScalerFuture
from scaler.payload import processor_context
from scaler.payload.actor_method import method_of
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID, new_task_id

if TYPE_CHECKING:
    from scaler.client.session import Session, TaskOptions

T = TypeVar("T")
#: How a handle's calls are given to the caller: the future itself (Client), or an awaitable of it (AsyncClient).
Wrap = Callable[[ScalerFuture[Any]], Any]

#: How many times an actor is built again after a loss, unless its starter says (Ray's default is 0).
DEFAULT_MAX_RESTARTS = 3


def interface_of(cls: type) -> bytes:
    """The names of the class's public methods, as a handle needs them (ActorSpec.interface)."""
    names = sorted(name for name, value in inspect.getmembers(cls) if callable(value) and not name.startswith("_"))
    return "\n".join(names).encode()


def spec_of(
    cls: Any, max_restarts: int = DEFAULT_MAX_RESTARTS, max_concurrency: int = 1, name: str | None = None
) -> m.ActorSpec:
    """The ActorSpec of an actor of class `cls`, its options checked (ValueError naming the wrong one)."""
    if not isinstance(cls, type):
        raise TypeError(f"an actor is an instance of a class: pass the class itself, not {type(cls).__name__}")
    if not isinstance(max_restarts, int) or isinstance(max_restarts, bool) or max_restarts < -1:
        raise ValueError(f"max_restarts must be a whole number >= 0, or -1 for no limit, not {max_restarts!r}")
    if not isinstance(max_concurrency, int) or isinstance(max_concurrency, bool) or max_concurrency < 1:
        raise ValueError(f"max_concurrency must be a whole number >= 1, not {max_concurrency!r}")
    if name is not None and (not isinstance(name, str) or not name or len(name) > 200):
        raise ValueError(f"an actor's name must be a non-empty string of at most 200 characters, not {name!r}")
    # inside a task its name belongs to the task's client's key (scheduler/core/actors.py rule 5)
    from_task = processor_context.running_task_id() if name else b""
    return m.ActorSpec(max_restarts, max_concurrency, name or "", interface_of(cls), from_task)


#: How a handle sent to a task is made again there: (actor id, class name, method names) -> a handle calling through
#: the task's own client; `scaler.client.client` gives it, since it owns the client a task has.
Rebuild = Callable[[TaskID, str, tuple[str, ...]], "ActorHandle[Any]"]


class ActorHandle(Generic[T]):
    """A live actor: `handle.method(*args, **kwargs)` is a future of the method's call on its instance (see the
    module's docstring). `stop()` ends it after the calls made before; `started` is the future of its start task
    (done when the actor ended: its value is None, or it raises why the actor could not be built)."""

    def __init__(
        self, session: Session, actor_id: TaskID, class_name: str, methods: frozenset[str], started: ScalerFuture[Any]
        | None, rebuild: Rebuild, wrap: Wrap | None = None, owned: bool = True,
        unstarted: tuple[type[Any], m.ActorSpec, TaskOptions] | None = None,
    ) -> None:  # fmt: skip
        self._session = session
        self._rebuild = rebuild  #: makes this handle again where it is unpickled (given by the client that owns it)
        self._actor_id = actor_id
        self._class_name = class_name
        self._methods = methods
        self._started = started
        self._wrap = wrap
        self._owned = owned  #: the handle that started an anonymous actor stops it when collected
        self._stopped = False
        #: what `begin` starts the actor with (a handle made by `start_later`, until then)
        self._unstarted = unstarted

    @classmethod
    def start(
        cls, session: Session, actor_class: type[T], args: tuple[Any, ...], kwargs: dict[str, Any],
        spec: m.ActorSpec, options: TaskOptions, rebuild: Rebuild, wrap: Wrap | None = None,
    ) -> ActorHandle[T]:  # fmt: skip
        actor_id, started = session.start_actor(actor_class, args, kwargs, spec, options)
        methods = frozenset(spec.interface.decode().split("\n")) - {""}
        return cls(session, actor_id, actor_class.__qualname__, methods, started, rebuild, wrap, owned=not spec.name)

    @classmethod
    def start_later(
        cls, session: Session, actor_class: type[T], spec: m.ActorSpec, options: TaskOptions, rebuild: Rebuild
    ) -> ActorHandle[T]:
        """A handle on an actor started later, by `handle.begin(args, kwargs)` once its arguments are ready (Ray's
        `Cls.remote(ref)` returns at once). The handle's id is the start task's already; its calls must not leave
        before the start (the Ray front end orders them after it)."""
        methods = frozenset(spec.interface.decode().split("\n")) - {""}
        name, unstarted = actor_class.__qualname__, (actor_class, spec, options)
        return cls(session, new_task_id(), name, methods, None, rebuild, None, not spec.name, unstarted)

    def begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ScalerFuture[Any]:
        """Start the actor of a handle made by `start_later`: the start task's future."""
        assert self._unstarted is not None, "begin() is for a handle made by start_later(), once"
        actor_class, spec, options = self._unstarted
        self._unstarted = None
        _, self._started = self._session.start_actor(actor_class, args, kwargs, spec, options, self._actor_id)
        return self._started

    @classmethod
    def look_up(cls, session: Session, name: str, rebuild: Rebuild, wrap: Wrap | None = None) -> ActorHandle[Any]:
        """A handle on the live actor of that name (ValueError when there is none); it does not stop it when
        collected."""
        reply = session.lookup_actor(name)
        if not reply.found:
            raise ValueError(reply.reason or f"no live actor is named {name!r}")
        methods = frozenset(reply.interface.decode().split("\n")) - {""}
        return cls(session, reply.actor_id, reply.class_name, methods, None, rebuild, wrap, owned=False)

    @property
    def actor_id(self) -> TaskID:
        return self._actor_id

    @property
    def class_name(self) -> str:
        return self._class_name

    @property
    def methods(self) -> frozenset[str]:
        """The names of the actor's public methods (empty when not known: every name is tried as one)."""
        return self._methods

    @property
    def started(self) -> ScalerFuture[Any] | None:
        """The start task's future (None for a handle found by name)."""
        return self._started

    def __repr__(self) -> str:
        return f"<ActorHandle {self._class_name} {self._actor_id.hex()[:8]}>"

    def __getattr__(self, name: str) -> ActorMethodCall:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._methods and name not in self._methods:
            raise AttributeError(
                f"actor {self._class_name} has no public method {name!r} (it has: {', '.join(sorted(self._methods))})"
            )
        return ActorMethodCall(self, name)

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A future of `instance.method(*args, **kwargs)` on the actor (what `handle.method(...)` does)."""
        future = self._session.call_actor(self._actor_id, method_of(self._class_name, method), args, kwargs)
        return future if self._wrap is None else self._wrap(future)

    def stop(self) -> None:
        """End the actor once the calls made before this have run; calls made after it fail (ActorDiedError)."""
        self._stopped = True
        self._session.stop_actor(self._actor_id)

    def __reduce__(self) -> Any:
        """Sent to a task, a handle calls the same actor from there (through the task's own client); it does not stop
        the actor when collected."""
        return (self._rebuild, (self._actor_id, self._class_name, tuple(sorted(self._methods))))

    def __del__(self) -> None:
        try:
            if self._owned and not self._stopped and self._session.is_open:
                self._stopped = True
                self._session.stop_actor(self._actor_id, flush=False)
        except Exception:
            pass  # the interpreter is ending, or the connection is gone: the actor ends with its client


class ActorMethodCall:
    """`handle.method`: calling it calls the method on the actor."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: ActorHandle[Any], method: str) -> None:
        self._handle, self._method = handle, method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._handle.call(self._method, args, kwargs)

    def __repr__(self) -> str:
        return f"<method {self._method} of {self._handle!r}>"
