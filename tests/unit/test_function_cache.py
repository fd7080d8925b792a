"""A client's function cache (TaskEncoder.function) finds a function it serialized before by identity, and does not
keep it alive: once the caller drops a submitted callable (a bound method, and with it its object), the callable is
collected and its entry goes.

Checked by switching the mechanism off: with the entry holding the function strongly (`_held` returning
`functools.partial(_same, function)` for every function), `test_a_submitted_bound_method_does_not_keep_its_object`
fails (the object stays alive, held by the cache)."""

from __future__ import annotations

import gc
import weakref

from tests.unit.test_payload import Sides


class Model:
    def __init__(self) -> None:
        self.weights = list(range(1000))

    def predict(self, x: int) -> int:
        return self.weights[x]


def square(x: int) -> int:
    return x * x


def test_a_function_is_serialized_once_and_found_again() -> None:
    sides = Sides()
    first = sides.encoder.function(square)
    assert sides.encoder.function(square) is first
    assert sides.encoder.function(square, refresh=True) is not first


def test_a_submitted_bound_method_does_not_keep_its_object() -> None:
    sides = Sides()
    model = Model()
    alive = weakref.ref(model)
    sides.task(model.predict, 3)
    del model
    gc.collect()
    assert alive() is None, "the function cache kept the bound method's object alive"
    assert not sides.encoder._functions, "the collected method's entry stayed in the cache"


def test_a_builtin_without_weak_references_is_cached_too() -> None:
    sides = Sides()
    entry = sides.encoder.function(len)
    assert sides.encoder.function(len) is entry
