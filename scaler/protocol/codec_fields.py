"""The hand-written part of the codec: how the values the mapping table (generate/mapping.py) holds as another
Python type are written and read. The generated writers and readers (codec_structs.py) call these."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

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


_Value = TypeVar("_Value")


class _Factory:
    """The default of a parameter whose field has a default factory (as dataclasses' own __init__ marks it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def constructor(cls: type[_Value]) -> Callable[..., _Value]:
    """A function that makes a value of the frozen slotted dataclass `cls` as `cls(...)` does (the same parameters,
    defaults and default factories), for the generated readers: it sets each slot through its member descriptor,
    where a frozen dataclass's `__init__` calls `object.__setattr__` per field (which looks the name up on the type
    each time): a Task is made in about half the time (docs/performance.md). The value is as frozen as any other:
    only this function sets its slots, once. A class it cannot mirror (an `InitVar`, keyword-only fields,
    `__post_init__`, a field that is not a slot) is made by `cls` itself."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    setters = [getattr(cls, f.name, None) for f in fields]
    if (
        hasattr(cls, "__post_init__")
        or len(fields) != len(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        or any(f.kw_only for f in fields)
        or not all(isinstance(setter, types.MemberDescriptorType) for setter in setters)
    ):
        return cls
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_FACTORY": _FACTORY}
    parameters, body = [], ["    v = _new(_cls)"]
    for index, (f, setter) in enumerate(zip(fields, setters, strict=True)):
        namespace[f"_set{index}"] = setter.__set__  # type: ignore[union-attr]
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            namespace[f"_factory{index}"] = f.default_factory
        elif f.default is not dataclasses.MISSING:
            namespace[f"_default{index}"] = f.default
        if not f.init:  # set as dataclasses' __init__ sets it
            body.append(f"    _set{index}(v, {f'_factory{index}()' if has_factory else f'_default{index}'})")
            continue
        if has_factory:
            parameters.append(f"{f.name}=_FACTORY")
            body.append(f"    _set{index}(v, _factory{index}() if {f.name} is _FACTORY else {f.name})")
        else:
            parameters.append(f"{f.name}=_default{index}" if f.default is not dataclasses.MISSING else f.name)
            body.append(f"    _set{index}(v, {f.name})")
    source = "\n".join([f"def new_{cls.__name__}({', '.join(parameters)}):", *body, "    return v"])
    exec(source, namespace)  # our own source, built from the class's fields (as dataclasses does)
    made: Callable[..., _Value] = namespace[f"new_{cls.__name__}"]
    made.__qualname__ = f"constructor({cls.__qualname__})"
    return made
