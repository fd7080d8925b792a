"""The hand-written part of the codec: how the values the mapping table (generate/mapping.py) holds as another
Python type are written and read. The generated writers and readers (codec_structs.py) call these."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scaler.protocol.frozen_values import constructor
from scaler.protocol.message_extras import Capabilities, WorkerLimit
from scaler.protocol.schemas import field_of

__all__ = [
    "capabilities_of",
    "constructor",
    "field_of",
    "limit_of",
    "negative_if_none",
    "none_if_negative",
    "set_capabilities",
    "set_limit",
    "set_structs",
    "share_or_default",
    "shared",
]


def set_structs(builder: Any, name: str, values: Sequence[Any], write: Callable[[Any, Any], None]) -> None:
    for item, value in zip(builder.init(name, len(values)), values, strict=True):
        write(item, value)


def set_capabilities(builder: Any, name: str, capabilities: Capabilities) -> None:
    if not capabilities:
        return
    items = builder.init(name, len(capabilities))
    for item, (cap_name, value) in zip(items, capabilities, strict=True):
        item.name = cap_name
        item.value = value


def capabilities_of(reader: Any) -> Capabilities:
    return tuple(sorted((c.name, c.value) for c in reader)) if len(reader) else ()


def set_limit(builder: Any, name: str, limit: WorkerLimit) -> None:
    target = getattr(builder, name)
    if limit is None:
        target.unlimited = None
    else:
        target.limit = limit


def limit_of(reader: Any) -> WorkerLimit:
    return None if reader.which() == "unlimited" else int(reader.limit)


def share_or_default(share: float) -> float:
    """A client's share: 0 (not given) is the default share, 1."""
    return share if share else 1.0


def negative_if_none(seconds: float | None) -> float:
    """A duration that may be undeclared: -1 on the wire."""
    return -1.0 if seconds is None else seconds


def none_if_negative(seconds: float) -> float | None:
    return seconds if seconds >= 0 else None


#: One bytes object per client id among the tasks decoded lately: a queue of a million tasks from one client
#: holds its id once, not a million times.
_SHARED: dict[bytes, bytes] = {}
_MAX_SHARED = 4096


def shared(value: Any) -> Any:
    kept = _SHARED.get(value)
    if kept is None:
        if len(_SHARED) >= _MAX_SHARED:
            _SHARED.clear()
        kept = _SHARED[value] = value
    return kept
