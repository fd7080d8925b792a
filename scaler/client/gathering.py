"""`gather` and `scatter` over nested containers: the futures (or data) in lists, tuples, sets and dicts, in the same
nesting as given, as Dask's `Client.gather`/`Client.scatter` take them.

Shared by `Client.gather`/`Client.scatter` and the Dask front end (`scaler.compat.dask`), each with its own idea of a
future and of a stored value.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable
from typing import Any

#: `errors=` of gather: raise a failed future's error, or leave it out (of a list, tuple, set or dict)
GATHER_ERRORS = ("raise", "skip")

_SKIPPED = object()


def checked_errors(errors: str) -> str:
    if errors not in GATHER_ERRORS:
        raise ValueError(f"errors must be 'raise' or 'skip', not {errors!r}")
    return errors


def futures_in(value: Any, is_future: Callable[[Any], bool]) -> list[Any]:
    """The futures in `value`, looking into lists, tuples, sets and dicts' values, in order."""
    found: list[Any] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if is_future(item):
            found.append(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            pending.extend(reversed(list(item)))
        elif isinstance(item, dict):
            pending.extend(reversed(list(item.values())))
    return found


def gather(
    value: Any,
    is_future: Callable[[Any], bool],
    result_of: Callable[[Any], Any],
    errors: str = "raise",
    timeout_seconds: float | None = None,
) -> Any:
    """`value` with each future replaced by its result, in the same nesting (a bare future gives its result). Waits
    for them all first (up to `timeout_seconds`: TimeoutError). `errors="skip"`: a failed or cancelled future is
    left out of its container (a bare one raises)."""
    checked_errors(errors)
    pending = [future for future in futures_in(value, is_future) if hasattr(future, "add_done_callback")]
    if pending and timeout_seconds is not None:
        waited = concurrent.futures.wait([_settled(future) for future in pending], timeout=timeout_seconds)
        if waited.not_done:
            raise TimeoutError(
                f"gather: {len(waited.not_done)} of {len(pending)} futures not done in {timeout_seconds:g} s"
            )
    return _replace(value, is_future, result_of, errors, top=True)


def _settled(future: Any) -> concurrent.futures.Future[Any]:
    """A concurrent.futures.Future done when `future` is (a front end's future that is not one says how)."""
    if isinstance(future, concurrent.futures.Future):
        return future
    settled: concurrent.futures.Future[Any] = future.settled
    return settled


def _replace(
    value: Any, is_future: Callable[[Any], bool], result_of: Callable[[Any], Any], errors: str, top: bool
) -> Any:
    if is_future(value):
        if errors == "raise" or top:
            return result_of(value)
        try:
            return result_of(value)
        except BaseException:
            return _SKIPPED
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_replace(item, is_future, result_of, errors, False) for item in value]
        kept = [item for item in items if item is not _SKIPPED]
        return _rebuilt(value, kept)
    if isinstance(value, dict):
        pairs = ((key, _replace(item, is_future, result_of, errors, False)) for key, item in value.items())
        return {key: item for key, item in pairs if item is not _SKIPPED}
    return value


def _rebuilt(original: Any, items: Iterable[Any]) -> Any:
    """A container of `original`'s type holding `items` (a namedtuple or other tuple subclass as a plain tuple when
    it cannot be rebuilt from an iterable)."""
    kind = type(original)
    if kind in (list, tuple, set, frozenset):
        return kind(items)
    try:
        return kind(items)
    except TypeError:
        return tuple(items) if isinstance(original, tuple) else list(items)


def scatter(data: Any, store: Callable[[Any], Any]) -> Any:
    """`store(item)` for one object, each item of a list, tuple or set (in the same type), or each value of a dict
    (under the same keys); an iterator is read as a list. What Dask's scatter does with its argument's top level."""
    if isinstance(data, dict):
        return {key: store(value) for key, value in data.items()}
    if isinstance(data, (list, tuple, set, frozenset)):
        return _rebuilt(data, [store(item) for item in data])
    if hasattr(data, "__next__"):
        return [store(item) for item in data]
    return store(data)
