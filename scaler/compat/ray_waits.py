"""`ray.get` and `ray.wait` on scaler.compat.ray's references (a module of their own: `ray_actor_pool` uses them too,
below the `ray` namespace that re-exports them)."""

from __future__ import annotations

import concurrent.futures
import functools
import time
from typing import Any

from scaler.compat.ray_refs import ObjectRef
from scaler.compat.ray_session import current, read_stored


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
    read = None if ref.is_task_result() else functools.partial(read_stored, current().client)
    return ref.get(remaining, read)


def wait(
    object_refs: list[ObjectRef], *, num_returns: int = 1, timeout: float | None = None, fetch_local: bool = True
) -> tuple[list[ObjectRef], list[ObjectRef]]:
    """(ready, not ready): at least `num_returns` ready references (at most that many listed as ready), or fewer
    when `timeout` seconds pass; each list keeps the input's order."""
    if not isinstance(object_refs, list) or not all(isinstance(ref, ObjectRef) for ref in object_refs):
        raise TypeError(f"wait() expected a list of ray.ObjectRef, got {type(object_refs).__name__}")
    if not object_refs:
        return [], []
    if len({id(ref) for ref in object_refs}) != len(object_refs):
        raise ValueError("Wait requires a list of unique object refs.")
    wanted = len(object_refs) if num_returns is None else num_returns
    if wanted < 0 or wanted > len(object_refs):
        raise ValueError("Invalid number of objects to return: num_returns must be between 0 and the number of refs.")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pending = [future for ref in object_refs if not ref.ready() and (future := ref.task_future) is not None]
        remaining = None if deadline is None else deadline - time.monotonic()
        if len(object_refs) - len(pending) >= wanted or (remaining is not None and remaining <= 0):
            break
        concurrent.futures.wait(pending, timeout=remaining, return_when=concurrent.futures.FIRST_COMPLETED)
    ready = [ref for ref in object_refs if ref.ready()][:wanted]
    chosen = {id(ref) for ref in ready}
    return ready, [ref for ref in object_refs if id(ref) not in chosen]
