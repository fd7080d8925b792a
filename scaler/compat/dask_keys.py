"""How the Dask front end names and shapes what it submits: keys (Dask's `funcname-token`, the same for the same call
when `pure`), `resources=` as capabilities, `retries=` as a runner that calls again, and the options of Dask's that
scaler refuses by name.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import uuid
from typing import Any

import cloudpickle

#: Dask's options that place a task on named workers: scaler's scheduler places tasks itself (capabilities choose
#: which workers may take one).
PLACEMENT_OPTIONS = ("workers", "allow_other_workers")
#: The reason given when a Dask actor is asked for.
ACTORS_REFUSED = (
    "Dask actors (actor=True) are not supported by scaler.compat.dask: use scaler's actors, Client.native.actor(Cls, "
    "...) (`scaler --docs actors_and_streams`), whose method calls return futures"
)


def tokenize(*values: Any) -> str:
    """Dask's token of the values when Dask is installed; else a digest of their pickle (a random token for values
    that cannot be pickled)."""
    try:
        from dask.base import tokenize as dask_tokenize
    except ImportError:
        try:
            return hashlib.md5(cloudpickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()
        except Exception:
            return uuid.uuid4().hex
    return str(dask_tokenize(*values))


def funcname(function: Any) -> str:
    """The short name Dask puts before a task's token."""
    while isinstance(function, functools.partial):
        function = function.func
    name = getattr(function, "__name__", None) or type(function).__name__
    return "lambda" if name == "<lambda>" else str(name)


def token_of(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], pure: bool) -> str:
    """The same for the same function and arguments when `pure` (Dask's default), else a new one."""
    return tokenize(function, kwargs, *args) if pure else uuid.uuid4().hex


def key_of(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], pure: bool) -> str:
    """A task's key: `funcname-token` (see `token_of`)."""
    return f"{funcname(function)}-{token_of(function, args, kwargs, pure)}"


def capabilities_of(resources: dict[str, Any] | None) -> dict[str, int] | None:
    """Dask's `resources={"GPU": 1}` as scaler capabilities: the task goes only to workers offering each name (started
    with `--per-worker-capabilities GPU`); amounts must be whole numbers (workers are not counted down per task)."""
    if not resources:
        return None
    if not isinstance(resources, dict):
        raise TypeError(f"resources must be a dict of names to amounts, not {type(resources).__name__}")
    capabilities: dict[str, int] = {}
    for name, amount in resources.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0 or amount != int(amount):
            raise ValueError(
                f"resources={{{name!r}: {amount!r}}}: scaler matches resources as capabilities by name, with whole "
                "amounts; a fraction of a resource is not supported"
            )
        capabilities[str(name)] = int(amount)
    return capabilities


def refuse_placement(workers: Any, allow_other_workers: bool) -> None:
    if workers is not None:
        raise NotImplementedError(
            "workers=... is not supported by scaler.compat.dask: scaler's scheduler places tasks itself; to keep a "
            "task to some workers, give them a capability (--per-worker-capabilities NAME) and the task "
            "resources={'NAME': 1}"
        )
    if allow_other_workers:
        raise NotImplementedError("allow_other_workers is not supported by scaler.compat.dask (nor is workers=)")


def checked_retries(retries: Any) -> int:
    if retries is None:
        return 0
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be a whole number >= 0, not {retries!r}")
    return retries


def with_retries(function: Any, retries: int) -> Any:
    """`function`, or a runner that calls it again, in the same process, up to `retries` more times when it raises
    (Dask runs a failed task again up to its `retries`)."""
    if retries == 0:
        return function
    return functools.partial(call_with_retries, function, retries)


def call_with_retries(function: Any, retries: int, *args: Any, **kwargs: Any) -> Any:
    """Runs on a worker (see `with_retries`)."""
    for attempt in range(retries + 1):
        try:
            return function(*args, **kwargs)
        except Exception:
            if attempt == retries:
                raise
    raise AssertionError("unreachable")
