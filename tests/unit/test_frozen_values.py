"""scaler/protocol/frozen_values.py: the generated readers make values with `constructor`, not with the class, and the
scheduler's events and effects have `quick_init`'s `__init__`: what they make is what dataclasses' own `__init__`
makes (the same parameters and defaults, fresh default factories, init=False fields set), and stays frozen.

Checked by hand: with the constructor's slots set in another order, or a factory's value shared between calls, these
tests fail; the golden frames (test_wire_golden.py) check every reader's values besides."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from scaler.protocol import codec_structs as cs
from scaler.protocol import messages as m
from scaler.protocol import storage_messages as sm
from scaler.protocol.frozen_values import constructor, quick_init
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import Received

CONSTRUCTORS = {name: value for name, value in vars(cs).items() if name.startswith("_NEW_")}


def _class_of(made: Any) -> type:
    name = made.__qualname__.removeprefix("constructor(").removesuffix(")")
    for module in (m, sm):
        if hasattr(module, name):
            return getattr(module, name)  # type: ignore[no-any-return]
    raise AssertionError(f"no class {name}")


def test_every_generated_class_has_its_own_constructor_not_the_class() -> None:
    assert len(CONSTRUCTORS) > 50
    assert all(not inspect.isclass(made) for made in CONSTRUCTORS.values())


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_a_value_made_by_the_constructor_is_the_one_the_class_makes(name: str) -> None:
    made = CONSTRUCTORS[name]
    cls = _class_of(made)
    parameters = inspect.signature(cls).parameters
    ours = inspect.signature(made).parameters
    assert list(ours) == list(parameters)
    required = {key: object() for key, parameter in parameters.items() if parameter.default is parameter.empty}
    by_us, by_class = made(**required), cls(**required)
    assert type(by_us) is cls
    fields = dataclasses.fields(cls)
    for f in fields:
        ours_value, theirs = getattr(by_us, f.name), getattr(by_class, f.name)
        assert ours_value == theirs, f.name
        if f.name in required:
            assert ours_value is required[f.name]
        if f.default_factory is not dataclasses.MISSING:
            assert ours_value is not getattr(made(**required), f.name), f"{f.name}: a factory's value is shared"
    assert by_us == by_class and repr(by_us) == repr(by_class)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(by_us, fields[0].name, None)


def test_every_argument_lands_in_its_own_field() -> None:
    names = [f.name for f in dataclasses.fields(m.Task) if f.init]
    values: list[Any] = [object() for _ in names]
    task = cs._NEW_M_TASK(*values)
    assert [getattr(task, name) for name in names] == values
    assert task.wire is None
    assert task == m.Task(*values)


def test_a_class_it_cannot_mirror_is_made_by_the_class_itself() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    @dataclasses.dataclass(frozen=True)
    class WithoutSlots:
        value: int

    assert constructor(Checked) is Checked
    assert constructor(WithoutSlots) is WithoutSlots


def _twin(cls: type) -> type:
    """The same dataclass with dataclasses' own `__init__`."""
    spec = [(f.name, f.type, f) for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(f"{cls.__name__}Twin", spec, frozen=True, slots=True)


@dataclasses.dataclass(frozen=True, slots=True)
class _Mixed:
    first: bytes
    listed: list[int] = dataclasses.field(default_factory=list)
    plain: int = 3
    hidden: str = dataclasses.field(default="h", init=False, compare=False)


@pytest.mark.parametrize("cls", [Send, Received, quick_init(_Mixed)], ids=lambda cls: cls.__name__)
def test_quick_init_makes_what_dataclasses_init_makes(cls: type) -> None:
    twin = _twin(cls)
    assert list(inspect.signature(cls).parameters) == list(inspect.signature(twin).parameters)
    required = [object() for p in inspect.signature(twin).parameters.values() if p.default is p.empty]
    ours, theirs = cls(*required), twin(*required)
    for f in dataclasses.fields(cls):
        assert getattr(ours, f.name) == getattr(theirs, f.name), f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(ours, dataclasses.fields(cls)[0].name, None)
    if cls is _Mixed:
        assert ours.listed is not cls(b"x").listed and cls(b"x", [1], 4).plain == 4
        assert ours.hidden == "h"
