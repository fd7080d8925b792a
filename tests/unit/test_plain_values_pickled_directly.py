"""A value cloudpickle would pickle exactly as pickle does (a plain value, or a short tuple or list of them: a task's
`return value, seconds`) is pickled by the C pickler directly (`serializer._plain`), with the same bytes: cloudpickle's
pickler, made in Python for each call, costs a processor several times the pickling per result.

Checked by hand with the mechanism off (`_plain` as `type(obj) in _PLAIN_TYPES`, as before): the first test fails
(cloudpickle is called for the tuple and the list). The second guards the bytes, which must not change either way.
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle
import pytest

from scaler.payload import serializer as serializer_module
from scaler.payload.serializer import DefaultSerializer, serialize_to_frames

PLAIN = [(1.5, 0.002), [1, "a", b"b", None, True, 2j], (), 7, "text"]
NOT_PLAIN = [(1.5, [1]), tuple(range(17)), {"a": 1}, (lambda: 1,)]


def test_short_tuples_and_lists_of_plain_values_skip_cloudpickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("cloudpickle was called for a plain value")

    monkeypatch.setattr(serializer_module.cloudpickle, "dumps", refuse)
    for value in PLAIN:
        assert pickle.loads(DefaultSerializer.serialize(value)) == value
        (frame,) = serialize_to_frames(DefaultSerializer(), value)
        assert pickle.loads(frame) == value


def test_the_bytes_are_cloudpickles() -> None:
    for value in PLAIN + NOT_PLAIN[:3]:
        expected = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        assert DefaultSerializer.serialize(value) == expected
        assert serialize_to_frames(DefaultSerializer(), value) == [expected]
    made_in_main = NOT_PLAIN[3]
    assert pickle.loads(DefaultSerializer.serialize(made_in_main))[0]() == 1  # by value, through cloudpickle
