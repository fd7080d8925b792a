"""A function pickled by value keeps its source file's name: a traceback of its failure shows the failing line."""

from __future__ import annotations

import linecache
import sys
import traceback
import types
from pathlib import Path

import cloudpickle
import pytest

from scaler.payload.serializer import DefaultSerializer


def test_a_function_pickled_by_value_keeps_its_file_and_its_traceback_shows_the_line(tmp_path: Path) -> None:
    source = tmp_path / "by_value_module.py"
    source.write_text("def div(x, y):\n    return x / y\n")
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__("by_value_module")
        cloudpickle.register_pickle_by_value(module)
        try:
            payload = DefaultSerializer.serialize(module.div)
        finally:
            cloudpickle.unregister_pickle_by_value(module)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("by_value_module", None)
    function = DefaultSerializer.deserialize(payload)
    assert isinstance(function, types.FunctionType)
    assert function.__code__.co_filename == str(source)
    linecache.checkcache()
    with pytest.raises(ZeroDivisionError) as caught:
        function(1, 0)
    lines = [frame.line for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert "return x / y" in lines
