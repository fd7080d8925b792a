"""What a worker runs before any task: `--preimport` modules, once in its zygote; `--preload` functions, once per
processor.

`--preimport numpy sklearn.svm`: the zygote (the process the worker forks its processors from) imports these modules
before it forks any, so every processor starts with them imported and their pages shared, and no task pays the import.
A name that is not a dotted module name is refused before the worker starts; a module that fails to import stops the
worker (its zygote logs why and exits). A module whose import starts threads does not belong there (a process forked
from a threaded one holds only the forking thread): `--preload` it instead.

`--preload "pkg.mod:func"` or `"pkg.mod:func('x', debug=False)"`: parse, then run once per processor, after its fork.
Arguments must be literals (strings, numbers, booleans, None, lists, tuples, dicts, sets); anything
else is refused before the worker starts, with a message that says which part is not a literal.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scaler.errors import PreloadError

FORM = "pkg.module:function or pkg.module:function(literal arguments)"


def check_preimport(names: Sequence[str]) -> None:
    """Refuse what cannot be a module name (before the worker starts), naming it."""
    for name in names:
        if not name or not all(part.isidentifier() for part in name.split(".")):
            raise PreloadError(f"bad --preimport {name!r}: expected a module name such as numpy or sklearn.svm")


def preimport(names: Sequence[str]) -> None:
    """Import `names`, in order (in the zygote, before its first fork); PreloadError names the one that failed."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:  # an import may raise anything; the worker stops on any of them
            problem = f"{type(error).__name__}: {error}"
            raise PreloadError(f"--preimport: cannot import module {name!r}: {problem}") from error


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
