"""The generated messages' written-out `__init__` and `FrozenValue`'s `__eq__`, `__hash__` and `__repr__`
(scaler/protocol/frozen_values.py) behave as the frozen slotted dataclass each class was: every class is compared with
a dataclass made here from its own fields (`dataclasses.make_dataclass`, frozen and slotted, every field's default,
factory, init, repr and compare kept): the same signature, the same values from the same arguments (fresh factory
values), equal and hashed alike (fields with compare=False ignored), shown alike, replaced, pickled and copied alike,
and frozen.

Checked by hand: with `FrozenValue.__eq__` comparing every field (compare=False ones too), a default factory's value
shared between calls, or two fields' sets swapped in the generator's `__init__`, these tests fail."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from scaler.protocol import messages as m
from scaler.protocol import storage_messages as sm
from scaler.protocol.frozen_values import FrozenValue

CLASSES = {
    f"{module.__name__.rsplit('.', 1)[1]}.{name}": value
    for module in (m, sm)
    for name, value in vars(module).items()
    if isinstance(value, type) and issubclass(value, FrozenValue) and value.__module__ == module.__name__
}


def _reference(cls: type) -> type:
    """The frozen slotted dataclass `cls` would be, made by dataclasses from `cls`'s fields."""
    specs = []
    for f in dataclasses.fields(cls):
        keywords: dict[str, Any] = {"init": f.init, "repr": f.repr, "compare": f.compare}
        if f.default is not dataclasses.MISSING:
            keywords["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            keywords["default_factory"] = f.default_factory
        specs.append((f.name, f.type, dataclasses.field(**keywords)))
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True, slots=True)


class _Token:
    """An argument the test gives a field: hashable, equal only to itself, shown by its name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_token, (self.name,))


_TOKENS: dict[str, _Token] = {}


def _token(name: str) -> _Token:
    return _TOKENS.setdefault(name, _Token(name))


def _arguments(cls: type, tag: str) -> dict[str, Any]:
    return {f.name: _token(f"{tag}-{f.name}") for f in dataclasses.fields(cls) if f.init}


def test_every_generated_class_is_a_frozen_value() -> None:
    assert len(CLASSES) > 90
    generated = [
        value
        for module in (m, sm)
        for value in vars(module).values()
        if dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == module.__name__
    ]
    assert sorted(c.__qualname__ for c in generated) == sorted(c.__qualname__ for c in CLASSES.values())


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_generated_class_behaves_as_its_dataclass(name: str) -> None:
    cls = CLASSES[name]
    reference = _reference(cls)
    assert _parameters(cls) == _parameters(reference)
    assert cls.__match_args__ == reference.__match_args__  # type: ignore[attr-defined]
    assert cls.__slots__ == reference.__slots__  # type: ignore[attr-defined]

    given = _arguments(cls, "a")
    value, expected = cls(**given), reference(**given)
    fields = dataclasses.fields(cls)
    assert [getattr(value, f.name) for f in fields] == [getattr(expected, f.name) for f in fields]
    assert repr(value) == repr(expected)

    defaults = cls(**{f.name: given[f.name] for f in fields if f.init and _required(f)})
    for f in fields:
        if f.default_factory is not dataclasses.MISSING:  # a fresh value each time
            again = cls(**{f.name: given[f.name] for f in fields if f.init and _required(f)})
            assert getattr(defaults, f.name) == f.default_factory()
            assert getattr(again, f.name) is not getattr(defaults, f.name)

    same = cls(**given)
    assert value == same and hash(value) == hash(same) and not (value != same)
    assert value != expected  # another class: not equal, as dataclasses' own
    for f in fields:
        if not f.init:
            continue
        changed = dataclasses.replace(value, **{f.name: _token(f"b-{f.name}")})
        assert getattr(changed, f.name) is _token(f"b-{f.name}")
        reference_changed = dataclasses.replace(expected, **{f.name: _token(f"b-{f.name}")})
        assert (changed == value) == (reference_changed == expected), f.name  # compare=False fields ignored alike
        if f.compare:
            assert changed != value
    for copied in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
        assert type(copied) is cls and copied == value
        assert [getattr(copied, f.name) for f in fields if f.compare] == [
            getattr(value, f.name) for f in fields if f.compare
        ]
    if fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, fields[0].name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(value, fields[0].name)
    with pytest.raises(AttributeError):
        value.__dict__  # noqa: B018 - slotted: no instance dictionary


def _parameters(cls: type) -> list[str]:
    """Each parameter as shown: name, annotation and default (a default factory's shown as `<factory>`)."""
    return [str(parameter) for parameter in inspect.signature(cls).parameters.values()]


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def test_values_that_differ_only_in_an_uncompared_field_are_equal_and_hashed_alike() -> None:
    one, other = m.ClientInfo(name="a", owner_key="k1"), m.ClientInfo(name="a", owner_key="k2")
    assert one == other and hash(one) == hash(other)
    assert m.ClientInfo(name="a") != m.ClientInfo(name="b")
    assert repr(one) == (
        "ClientInfo(name='a', share=1.0, max_running_tasks=0, max_workers=0, resume_seconds=0.0, owner_key='k1', "
        "max_cost_per_hour=0.0, max_job_result_bytes=0)"
    )
