"""A function pickled by value keeps the name of its source file, so that its traceback shows the failing line.

cloudpickle names every code object it pickles by value `<dynamic-code>` (its payload then does not depend on
where the function was defined). A task whose module travels by value (a notebook's local module shipped to a
cloud unit, `payload.local_modules`) would then fail with frames no reader can match to a line. The reducer below
keeps the real file name: a worker on the same host, or one given the same file, shows the line; elsewhere the
frame still names the file and line number.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import cloudpickle

_PLACEHOLDER = "<dynamic-code>"


def keep_code_filenames() -> None:
    """Make cloudpickle keep a code object's file name (once; a cloudpickle without the placeholder is left alone)."""
    table = getattr(cloudpickle.Pickler, "_dispatch_table", None)
    if not isinstance(table, dict):
        return
    original = table.get(types.CodeType)
    if original is None or getattr(original, "keeps_filename", False):
        return
    table[types.CodeType] = _keeping_filename(original)


def _keeping_filename(original: Callable[[types.CodeType], tuple[Any, tuple[Any, ...]]]) -> Any:
    def reduce(code: types.CodeType) -> tuple[Any, tuple[Any, ...]]:
        constructor, fields = original(code)
        return constructor, tuple(code.co_filename if field == _PLACEHOLDER else field for field in fields)

    reduce.keeps_filename = True  # type: ignore[attr-defined]
    return reduce
