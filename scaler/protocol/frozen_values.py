"""Frozen slotted dataclasses made at the cost of mutable ones: a frozen dataclass's `__init__` sets each field with
`object.__setattr__`, which looks the name up on the type each time (a 12-field Task: about 1.25 us, against about 0.6
set through each slot's member descriptor). `constructor(cls)` is a function that makes a value as `cls(...)` does
(the generated codec's readers use it); `quick_init` gives a class such an `__init__` (the scheduler's events and
effects, made per task). Either keeps the class's parameters, defaults and default factories, and its values stay
frozen: only these set their slots, once. A class they cannot mirror (`__post_init__`, an `InitVar`, keyword-only
fields, a field that is not a slot) keeps dataclasses' own way."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["constructor", "quick_init"]

_Value = TypeVar("_Value")
_Class = TypeVar("_Class", bound=type)


class _Factory:
    """The default of a parameter whose field has a default factory (as dataclasses' own __init__ marks it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def constructor(cls: type[_Value]) -> Callable[..., _Value]:
    """A function that makes a value of `cls` as `cls(...)` does; `cls` itself when it cannot be mirrored."""
    made = _build(cls, init=False)
    return cls if made is None else made


def quick_init(cls: _Class) -> _Class:
    """Decorates a frozen slotted dataclass (above `@dataclass`): its `__init__` sets each slot through its member
    descriptor. The class is returned unchanged when it cannot be mirrored."""
    made = _build(cls, init=True)
    if made is not None:
        made.__qualname__ = f"{cls.__qualname__}.__init__"
        made.__doc__ = vars(cls)["__init__"].__doc__
        cls.__init__ = made  # type: ignore[misc]
    return cls


def _build(cls: type, init: bool) -> Callable[..., Any] | None:
    """The source of a function that sets every field of a value (`init`: `self`, as `__init__`; otherwise one made
    with `object.__new__`), compiled as dataclasses compiles its `__init__`."""
    fields = dataclasses.fields(cls)
    setters = [getattr(cls, f.name, None) for f in fields]
    if (
        hasattr(cls, "__post_init__")
        or len(fields) != len(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        or any(f.kw_only for f in fields)
        or not all(isinstance(setter, types.MemberDescriptorType) for setter in setters)
    ):
        return None
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_FACTORY": _FACTORY}
    value = "__value__"  # no field's name
    parameters, body = ([value], []) if init else ([], [f"    {value} = _new(_cls)"])
    for index, (f, setter) in enumerate(zip(fields, setters, strict=True)):
        namespace[f"_set{index}"] = setter.__set__  # type: ignore[union-attr]
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            namespace[f"_factory{index}"] = f.default_factory
        elif f.default is not dataclasses.MISSING:
            namespace[f"_default{index}"] = f.default
        if not f.init:  # set as dataclasses' __init__ sets it
            body.append(f"    _set{index}({value}, {f'_factory{index}()' if has_factory else f'_default{index}'})")
            continue
        if has_factory:
            parameters.append(f"{f.name}=_FACTORY")
            body.append(f"    _set{index}({value}, _factory{index}() if {f.name} is _FACTORY else {f.name})")
        else:
            parameters.append(f"{f.name}=_default{index}" if f.default is not dataclasses.MISSING else f.name)
            body.append(f"    _set{index}({value}, {f.name})")
    name = f"new_{cls.__name__}"
    body.append("    return None" if init else f"    return {value}")
    source = "\n".join([f"def {name}({', '.join(parameters)}):", *body])
    exec(source, namespace)  # our own source, built from the class's fields (as dataclasses does)
    made: Callable[..., Any] = namespace[name]
    made.__qualname__ = f"constructor({cls.__qualname__})"
    return made
