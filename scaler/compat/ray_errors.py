"""Ray's exceptions on scaler: a task's error reaches `ray.get` as Ray raises it, an exception that is both
`ray.exceptions.RayTaskError` and the task's own exception's type.

Ray makes, for an exception of type `E` raised by a task, an instance of a class `RayTaskError(E)` deriving from both
(`RayTaskError.as_instanceof_cause`): `except E` and `except RayTaskError` both catch it, `.cause` is the task's own
exception, and its text is the task's. A type that cannot be derived from (or built that way) gives a plain
`RayTaskError`, as Ray does. A cancelled task's `ray.get` raises `TaskCancelledError`, a `RayError` as in Ray and a
`concurrent.futures.CancelledError` too. An actor that died (scaler's `ActorDiedError`, `ActorRestartedError`) raises
an exception that is both that error and Ray's `ActorDiedError`, a `RayActorError` and so a `RayError` as in Ray.
Other errors of the cluster itself (`scaler.errors`: a processor that died, a lost worker ...) are raised as they
are.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any


class RayError(Exception):
    """The base of Ray's errors (`ray.exceptions.RayError`)."""


class TaskCancelledError(RayError, concurrent.futures.CancelledError):
    """The task was cancelled (`ray.exceptions.TaskCancelledError`): `except RayError` catches it, as in Ray, and so
    does `except concurrent.futures.CancelledError`, as the client's futures raise it."""


class RayActorError(RayError):
    """The actor a call was made to died, or could not be reached (`ray.exceptions.RayActorError`)."""


class ActorDiedError(RayActorError):
    """The actor died (`ray.exceptions.ActorDiedError`, a RayActorError as in Ray)."""


#: for each of scaler's actor errors (scaler.errors.ActorDiedError and its subclasses), the class that is both it and
#: Ray's ActorDiedError: what `ray.get` raises for it
_actor_error_classes: dict[type[BaseException], type[BaseException]] = {}


def _as_ray_actor_error(error: BaseException) -> BaseException:
    """Scaler's actor error as one that is also Ray's `ActorDiedError` (so a `RayActorError` and a `RayError`):
    `except scaler.errors.ActorDiedError` and `except ray.exceptions.RayActorError` both catch it."""
    kind = type(error)
    dual = _actor_error_classes.get(kind)
    if dual is None:
        dual = type(kind.__name__, (kind, ActorDiedError), {"__reduce__": _reduce_actor_error})
        dual.__module__ = "ray.exceptions"
        dual.__qualname__ = kind.__name__
        _actor_error_classes[kind] = dual
    converted = dual.__new__(dual, *error.args)
    converted.args = error.args
    converted.__dict__.update(getattr(error, "__dict__", {}))
    converted.__cause__ = error.__cause__
    return converted


def _reduce_actor_error(error: BaseException) -> tuple[Any, ...]:
    scaler_kind = next(kind for kind, dual in _actor_error_classes.items() if dual is type(error))
    return (_rebuild_actor_error, (scaler_kind, error.args))


def _rebuild_actor_error(kind: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    return _as_ray_actor_error(kind(*args))


class RayTaskError(RayError):
    """A task raised `cause` (`ray.exceptions.RayTaskError`); `as_instanceof_cause()` is what `ray.get` raises."""

    def __init__(self, function_name: str, traceback_str: str, cause: BaseException | None, *args: Any,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(f"{function_name}: {cause!r}" if cause is not None else function_name)
        self.function_name = function_name
        self.traceback_str = traceback_str
        self.cause = cause

    def as_instanceof_cause(self) -> RayTaskError:
        """An exception that is both this one and an instance of the cause's type (this one if none can be made)."""
        cause = self.cause
        if cause is None or isinstance(cause, RayTaskError) or not isinstance(cause, Exception):
            return self
        try:
            kind = _dual_class(type(cause))
            dual = Exception.__new__(kind, *cause.args)
            dual.__dict__.update(getattr(cause, "__dict__", {}))
            dual.function_name, dual.traceback_str, dual.cause = self.function_name, self.traceback_str, cause
        except Exception:  # a type that cannot be derived from, or instantiated without its own constructor
            return self
        return dual


class _Dual:
    """What the classes `RayTaskError(E)` add to their two bases: the cause's text, and pickling through the cause."""

    cause: BaseException

    def __str__(self) -> str:
        return str(self.cause)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_dual, (self.function_name, self.traceback_str, self.cause))  # type: ignore[attr-defined]


#: the class `RayTaskError(E)` of each type E met (one per type, as Ray's)
_dual_classes: dict[type[Exception], type[RayTaskError]] = {}


def _dual_class(cause_type: type[Exception]) -> type[RayTaskError]:
    kind = _dual_classes.get(cause_type)
    if kind is None:
        name = f"RayTaskError({cause_type.__name__})"
        kind = type(name, (_Dual, RayTaskError, cause_type), {"__init__": lambda self, *args, **kwargs: None})
        kind.__module__ = "ray.exceptions"
        kind.__qualname__ = name
        _dual_classes[cause_type] = kind
    return kind


def _rebuild_dual(function_name: str, traceback_str: str, cause: BaseException) -> RayTaskError:
    return RayTaskError(function_name, traceback_str, cause).as_instanceof_cause()


def as_ray_error(error: BaseException) -> BaseException:
    """What `ray.get` raises for a task's `error` (see the module docstring)."""
    from scaler.errors import ActorDiedError as ScalerActorDiedError
    from scaler.errors import ScalerError

    if isinstance(error, concurrent.futures.CancelledError) and not isinstance(error, TaskCancelledError):
        return TaskCancelledError(str(error) or "the task was cancelled (ray.cancel)")
    if isinstance(error, ScalerActorDiedError) and not isinstance(error, RayActorError):
        return _as_ray_actor_error(error)
    if isinstance(error, (RayTaskError, ScalerError, concurrent.futures.CancelledError)):
        return error
    if not isinstance(error, Exception):
        return error
    return RayTaskError("the task", "", error).as_instanceof_cause()
