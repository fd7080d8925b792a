"""ObjectReference: a handle on an object the client sent once to object storage (`send_object`).

A task receives the object itself wherever the reference appears in its arguments: positional or
keyword, or inside lists, dicts, tuples and other picklable containers. Inside a processor a
reference unpickles as its object (through the resolver the processor installs); anywhere else it
unpickles as a reference again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler.protocol.ids import short_task_id

_resolver: Callable[[bytes], Any] | None = None


@dataclass(frozen=True)
class ObjectReference:
    name: bytes
    size: int
    object_id: bytes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectReference) and other.object_id == self.object_id

    def __hash__(self) -> int:
        return hash(self.object_id)

    def __repr__(self) -> str:
        return f"ObjectReference(name={self.name!r}, size={self.size}, object_id={self.object_id.hex()[:16]}...)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.name, self.size, self.object_id))


def _rebuild(name: bytes, size: int, object_id: bytes) -> Any:
    if _resolver is not None:
        return _resolver(object_id)
    return ObjectReference(name, size, object_id)


def install_resolver(resolver: Callable[[bytes], Any] | None) -> None:
    """Processors install a resolver that returns the object for an id (fetching it if needed)."""
    global _resolver
    _resolver = resolver


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
