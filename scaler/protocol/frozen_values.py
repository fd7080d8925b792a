"""Frozen slotted dataclasses made at the cost of mutable ones: a frozen dataclass's `__init__` sets each field with
`object.__setattr__`, which looks the name up on the type each time, and a slot's member descriptor called as
`__set__` is a call through a method-wrapper with a tuple of its arguments (about 600 instructions a field). A value
is made instead as one of its class's *making* class (`_making_class`: a subclass that adds no slot and keeps
`object`'s `__setattr__`, so each slot is stored as a plain attribute, the interpreter's cheapest store), then given its
own class (a 15-field Task: about 2,600 instructions, against 10,800 through the descriptors). `constructor(cls)` is a
function that makes a value as `cls(...)` does (the generated codec's readers use it); `quick_init` gives a class such
an `__init__` (the scheduler's events and effects, made per task). Either keeps the class's parameters, defaults and
default factories, and its values stay frozen: only these set their slots, once, and what they return (or initialise)
is of the class itself. A class they cannot mirror (`__post_init__`, an `InitVar`, keyword-only fields, a field that is
not a slot) keeps dataclasses' own way; one whose values cannot change class so has its slots set through their
descriptors."""

from __future__ import annotations

import dataclasses
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda decorated: decorated


__all__ = ["FACTORY", "FrozenValue", "constructor", "frozen_value", "quick_init"]

_Value = TypeVar("_Value")
_Class = TypeVar("_Class", bound=type)


class _Factory:
    """The default of a parameter whose field has a default factory (as dataclasses' own __init__ marks it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()
#: The default of a generated `__init__`'s parameter whose field has a default factory.
FACTORY: Any = _FACTORY


class FrozenValue:
    """What a frozen dataclass's compiled methods do but `__init__`, written once for the generated messages (whose
    `__init__` the generator writes out; `frozen_value`): dataclasses compiles a class's methods from source at each
    import, about 1 ms a class, and every process imports about a hundred messages. Equal when of the same class with
    equal compared fields; hashed from those; shown as dataclasses shows a value (its fields with repr=True); frozen
    (an assignment or a deletion raises `dataclasses.FrozenInstanceError`); pickled and copied field by field."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        compared = _compared(self.__class__)
        return bool(compared(self) == compared(other))

    def __hash__(self) -> int:
        return hash(_compared(self.__class__)(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _shown(self.__class__))
        return f"{self.__class__.__qualname__}({shown})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> list[Any]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]  # type: ignore[arg-type]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(dataclasses.fields(self), state, strict=True):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, value)


@dataclass_transform(frozen_default=True)
def frozen_value(cls: _Class) -> _Class:
    """A frozen slotted dataclass of a `FrozenValue` class with its own `__init__`: its fields, as dataclasses records
    them (`fields`, `replace` and `asdict` work), with no method compiled."""
    made: _Class = dataclasses.dataclass(init=False, repr=False, eq=False, slots=True)(cls)  # type: ignore[assignment]
    return made


_COMPARED: dict[type, Callable[[Any], Any]] = {}
_SHOWN: dict[type, tuple[str, ...]] = {}


def _compared(cls: type) -> Callable[[Any], Any]:
    """A value's compared fields (dataclasses' `compare=True`) as one comparable, hashable value."""
    made = _COMPARED.get(cls)
    if made is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
        # a C function where it returns a tuple (two names or more)
        made = operator.attrgetter(*names) if len(names) > 1 else lambda value: tuple(getattr(value, n) for n in names)
        _COMPARED[cls] = made
    return made


def _shown(cls: type) -> tuple[str, ...]:
    made = _SHOWN.get(cls)
    if made is None:
        made = _SHOWN[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.repr)
    return made


def constructor(cls: type[_Value]) -> Callable[..., _Value]:
    """A function that makes a value of `cls` as `cls(...)` does; `cls` itself when it cannot be mirrored."""
    made = _build(cls, init=False)
    return cls if made is None else made


def quick_init(cls: _Class) -> _Class:
    """Decorates a frozen slotted dataclass (above `@dataclass`): its `__init__` sets each slot as a plain attribute
    (as a value of its making class: a subclass's value, through its member descriptor). The class is returned
    unchanged when it cannot be mirrored."""
    made = _build(cls, init=True)
    if made is not None:
        made.__qualname__ = f"{cls.__qualname__}.__init__"
        made.__doc__ = vars(cls)["__init__"].__doc__
        cls.__init__ = made  # type: ignore[misc]
    return cls


def _making_class(cls: type) -> type | None:
    """The class a value of `cls` is made as: a subclass that adds no slot and sets and deletes attributes as `object`
    does, so its values may be given `cls` as their class once their slots are set; None when that cannot be (a class
    whose values' class cannot be assigned)."""
    namespace: dict[str, Any] = {
        "__slots__": (),
        "__setattr__": object.__setattr__,  # both, or the type's attribute store is the generic Python-level one
        "__delattr__": object.__delattr__,
        "__module__": cls.__module__,
        "__qualname__": f"{cls.__qualname__}.making",
    }
    try:
        making: type = type(cls)(f"{cls.__name__}Making", (cls,), namespace)
        probe: Any = object.__new__(making)
        probe.__class__ = cls
    except TypeError:  # not a base, or a value's class cannot go from one to the other (another layout)
        return None
    return making


def _build(cls: type, init: bool) -> Callable[..., Any] | None:
    """The source of a function that sets every field of a value (`init`: `self`, as `__init__`; otherwise one made
    with `object.__new__`), compiled as dataclasses compiles its `__init__`: each field stored as a plain attribute of
    a value of the making class, which then gets `cls` as its class; through its member descriptor where `cls` has no
    making class (and in an `__init__` called for a subclass's value)."""
    fields = dataclasses.fields(cls)
    setters = [getattr(cls, f.name, None) for f in fields]
    if (
        hasattr(cls, "__post_init__")
        or len(fields) != len(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        or any(f.kw_only for f in fields)
        or not all(isinstance(setter, types.MemberDescriptorType) for setter in setters)
    ):
        return None
    making = _making_class(cls)
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_making": making, "_FACTORY": _FACTORY}
    namespace["_set_class"] = vars(object)["__class__"].__set__  # past the class's own (frozen) `__setattr__`
    value = "__value__"  # no field's name
    parameters = [value] if init else []
    stored: list[str] = []  #: each field's value, in the order dataclasses sets them
    for index, (f, setter) in enumerate(zip(fields, setters, strict=True)):
        namespace[f"_set{index}"] = setter.__set__  # type: ignore[union-attr]
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            namespace[f"_factory{index}"] = f.default_factory
        elif f.default is not dataclasses.MISSING:
            namespace[f"_default{index}"] = f.default
        if not f.init:  # set as dataclasses' __init__ sets it
            stored.append(f"_factory{index}()" if has_factory else f"_default{index}")
            continue
        if has_factory:
            parameters.append(f"{f.name}=_FACTORY")
            stored.append(f"_factory{index}() if {f.name} is _FACTORY else {f.name}")
        else:
            parameters.append(f"{f.name}=_default{index}" if f.default is not dataclasses.MISSING else f.name)
            stored.append(f.name)
    through_setters = [f"_set{index}({value}, {what})" for index, what in enumerate(stored)]
    as_attributes = [f"{value}.{f.name} = {what}" for f, what in zip(fields, stored, strict=True)]
    if making is None:
        body = through_setters if init else [f"{value} = _new(_cls)", *through_setters]
    elif init:  # made by the class (`cls(...)`), perhaps a subclass's value: that one keeps its class
        body = [
            f"if type({value}) is not _cls:",
            *(f"    {line}" for line in through_setters),
            "    return None",
            f"_set_class({value}, _making)",
            *as_attributes,
            f"{value}.__class__ = _cls",
        ]
    else:
        body = [f"{value} = _new(_making)", *as_attributes, f"{value}.__class__ = _cls"]
    name = f"new_{cls.__name__}"
    body.append("return None" if init else f"return {value}")
    source = "\n".join([f"def {name}({', '.join(parameters)}):", *(f"    {line}" for line in body)])
    exec(source, namespace)  # our own source, built from the class's fields (as dataclasses does)
    made: Callable[..., Any] = namespace[name]
    made.__qualname__ = f"constructor({cls.__qualname__})"
    return made
