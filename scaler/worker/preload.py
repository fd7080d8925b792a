"""`--preload "pkg.mod:func"` or `"pkg.mod:func('x', debug=False)"`: parse, then run once per processor.

Arguments must be literals (strings, numbers, booleans, None, lists, tuples, dicts, sets); anything
else is refused before the worker starts, with a message that says which part is not a literal.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler.errors import PreloadError

FORM = "pkg.module:function or pkg.module:function(literal arguments)"


@dataclass(frozen=True)
class PreloadSpec:
    module: str
    function: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]


def parse_preload(text: str) -> PreloadSpec:
    module, sep, call = text.strip().partition(":")
    if not sep or not module or not call:
        raise PreloadError(f"bad --preload {text!r}: expected {FORM}")
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError as error:
        raise PreloadError(f"bad --preload {text!r}: {error.msg} (expected {FORM})") from None
    if isinstance(node, ast.Name):
        return PreloadSpec(module, node.id, (), ())
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise PreloadError(f"bad --preload {text!r}: expected {FORM}")
    try:
        args = tuple(ast.literal_eval(arg) for arg in node.args)
        kwargs = tuple((kw.arg, ast.literal_eval(kw.value)) for kw in node.keywords if kw.arg is not None)
    except ValueError:
        raise PreloadError(f"bad --preload {text!r}: arguments must be literals (strings, numbers, ...)") from None
    if any(kw.arg is None for kw in node.keywords):
        raise PreloadError(f"bad --preload {text!r}: **kwargs expansion is not allowed")
    return PreloadSpec(module, node.func.id, args, kwargs)


def resolve_preload(spec: PreloadSpec) -> Callable[..., Any]:
    try:
        module = importlib.import_module(spec.module)
    except ImportError as error:
        raise PreloadError(f"--preload: cannot import module {spec.module!r}: {error}") from error
    function = getattr(module, spec.function, None)
    if not callable(function):
        raise PreloadError(f"--preload: module {spec.module!r} has no function {spec.function!r}")
    return function  # type: ignore[no-any-return]


def run_preload(text: str) -> None:
    spec = parse_preload(text)
    function = resolve_preload(spec)
    function(*spec.args, **dict(spec.kwargs))
