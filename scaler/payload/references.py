"""ObjectReference: a handle on an object the client sent once to object storage (`send_object`).

A task receives the object itself wherever the reference appears in its arguments: positional or
keyword, or inside lists, dicts, tuples and other picklable containers. Inside a processor a
reference unpickles as its object (through the resolver the processor installs); anywhere else it
unpickles as a reference again.

Where the object is mapped (a processor on the storage's host), the arrays it holds (numpy arrays, a pandas
frame's blocks) are read-only views of the one copy every processor of the host shares. `ref.copy_on_write()` (or
`scaler.copy_on_write(value)` for an argument passed by value) asks for a writable one instead: a private
copy-on-write view, whose written pages are copied for this task alone (as joblib's `mmap_mode="c"`); other tasks
and processes never see the writes.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler.protocol.ids import short_task_id

#: (object id, writable) -> the object
_resolver: Callable[[bytes, bool], Any] | None = None
#: `ids`, when set on a thread: the object ids of the references that thread pickles (`noted_while`)
_noting = threading.local()


@dataclass(frozen=True)
class ObjectReference:
    name: bytes
    size: int
    object_id: bytes
    #: the task gets a writable, private copy-on-write view of the object (see `copy_on_write`)
    writable: bool = dataclasses.field(default=False, compare=False)

    def copy_on_write(self) -> ObjectReference:
        """The same object, given to a task writable: a private copy-on-write view (pages copied as the task writes
        them; nobody else sees the writes), where the plain reference gives a read-only view of the host's one copy."""
        return dataclasses.replace(self, writable=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectReference) and other.object_id == self.object_id

    def __hash__(self) -> int:
        return hash(self.object_id)

    def __repr__(self) -> str:
        mode = ", copy on write" if self.writable else ""
        return f"ObjectReference(name={self.name!r}, size={self.size}, object_id={self.object_id.hex()[:16]}...{mode})"

    def __reduce__(self) -> tuple[Any, ...]:
        noted: list[bytes] | None = getattr(_noting, "ids", None)
        if noted is not None:
            noted.append(self.object_id)
        return (_rebuild, (self.name, self.size, self.object_id, self.writable))


def noted_while(pickling: Callable[[], Any], noted: list[bytes]) -> Any:
    """`pickling()`'s value, the object ids of the references it pickled (inside lists, dicts, a map's calls...)
    appended to `noted`: the inputs a task names for placement near them besides its own stored arguments."""
    outer = getattr(_noting, "ids", None)
    _noting.ids = noted
    try:
        return pickling()
    finally:
        _noting.ids = outer


def _rebuild(name: bytes, size: int, object_id: bytes, writable: bool = False) -> Any:
    if _resolver is not None:
        return _resolver(object_id, writable)
    return ObjectReference(name, size, object_id, writable)


def install_resolver(resolver: Callable[[bytes, bool], Any] | None) -> None:
    """Processors install a resolver that returns the object for an id (fetching it if needed), writable or not."""
    global _resolver
    _resolver = resolver


class CopyOnWrite:
    """An argument passed by value that its task gets writable (`copy_on_write`). Only a task's own arguments are
    unwrapped so; inside a container it unpickles as its value, read-only where mapped."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (_identity, (self.value,))

    def __repr__(self) -> str:
        return f"copy_on_write({self.value!r})"


def _identity(value: Any) -> Any:
    return value


def copy_on_write(value: Any) -> Any:
    """Ask for `value` writable in its task: `client.submit(fn, scaler.copy_on_write(big_array))` or
    `scaler.copy_on_write(ref)` (= `ref.copy_on_write()`). By default the arrays a task reads from object storage are
    read-only views of the one copy every processor of a host maps; this gives the task a private copy-on-write view
    instead, whose pages are copied only as they are written, never seen by other tasks. An argument small enough to
    travel inside the task is the task's own copy, writable anyway."""
    if isinstance(value, ObjectReference):
        return value.copy_on_write()
    if isinstance(value, CopyOnWrite):
        return value
    return CopyOnWrite(value)


_node_resolver: Callable[[bytes], Any] | None = None


class NodeResult:
    """Stands for the result of another graph node inside an argument (e.g. in a list). Inside a
    processor it unpickles as that result; the scheduler sends the result along with the task."""

    def __init__(self, task_id: bytes) -> None:
        self.task_id = task_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_node_result, (self.task_id,))

    def __repr__(self) -> str:
        return f"NodeResult(task {short_task_id(self.task_id)})"


def _rebuild_node_result(task_id: bytes) -> Any:
    if _node_resolver is not None:
        return _node_resolver(task_id)
    return NodeResult(task_id)


def install_node_resolver(resolver: Callable[[bytes], Any] | None) -> None:
    global _node_resolver
    _node_resolver = resolver
