"""Sleeps in the test process of the integration tier: `python -m tests.sleeps [FOLDER ...]` (default
tests/integration).

Reads every module below each FOLDER with `ast` and lists each call of `time.sleep` or `asyncio.sleep` (also under
another name: `from time import sleep`, `import time as t`) that the test process runs: in test functions, fixtures,
harnesses and their helpers, and in module-level code. A sleep there either waits out a fixed time (a scenario's
length: an outage, a freeze) or polls, which `wait_for` and friends (tests/integration/conftest.py) do in one place.
Not counted, each with its own total:
- code that runs in another process: a function or class passed as a value (to `Client.submit`, `map`, `actor`, a
  graph's tuple, ...), which a worker, an actor or a cloud unit runs (the workload's own pauses), and the scripts
  in string literals;
- the sleeps of a function handed to a thread or a signal handler of the test process count (they run there):
  a value passed to `threading.Thread(target=...)`, `asyncio.to_thread`, `run_in_executor`, `signal.signal`,
  `monkeypatch.setattr` or `wait_for` is not taken for shipped.

Prints `path:line function` per sleep counted, then `sleeps in integration test code: N` last (and what was left
out). Run from the project root.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: Calls whose function arguments run in the test process itself.
IN_PROCESS_SINKS = frozenset(
    {"Thread", "to_thread", "run_in_executor", "signal", "setattr", "wait_for", "partial", "isinstance", "cast"}
)
SLEEP_MODULES = frozenset({"time", "asyncio"})
_SLEEP_IN_TEXT = re.compile(r"\bsleep\(")


@dataclass(frozen=True)
class Sleep:
    path: Path
    line: int
    function: str
    shipped: bool


def _sleep_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound to the modules time/asyncio, names bound to their `sleep`) anywhere in a module."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in SLEEP_MODULES:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module in SLEEP_MODULES:
            functions.update(alias.asname or alias.name for alias in node.names if alias.name == "sleep")
    return modules, functions


def _is_sleep(call: ast.Call, modules: set[str], functions: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in functions
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "sleep"
        and isinstance(func.value, ast.Name)
        and func.value.id in modules
    )


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def shipped_names(tree: ast.Module) -> set[str]:
    """Names of functions and classes used as values (not called) in a module, outside the in-process sinks: what a
    test hands to a worker, an actor or a unit. A name a function binds itself (a variable, an argument) is that
    function's value, not a definition's."""
    sunk: set[int] = set()
    called: set[int] = set()
    for node in ast.walk(tree):
        for annotation in _annotations(node):
            sunk.update(id(inner) for inner in ast.walk(annotation))
        if isinstance(node, ast.Call):
            called.add(id(node.func))
            if _call_name(node) in IN_PROCESS_SINKS:
                for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                    sunk.update(id(inner) for inner in ast.walk(argument))
    return {name.id for name in _free_loads(tree, frozenset()) if id(name) not in called | sunk}


def _free_loads(scope: ast.AST, bound: frozenset[str]) -> Iterator[ast.Name]:
    """The names read in a scope and the scopes inside it that no enclosing function binds as a variable."""
    for child in ast.iter_child_nodes(scope):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _free_loads(child, bound | _variables(child))
        elif isinstance(child, ast.Name):
            if isinstance(child.ctx, ast.Load) and child.id not in bound:
                yield child
        else:
            yield from _free_loads(child, bound)


def _variables(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
    """What a function binds as a variable (its arguments, its assignments), not its nested definitions."""
    arguments = function.args
    names = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    body = function.body if isinstance(function.body, list) else [function.body]
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return frozenset(names)


def _annotations(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.arg | ast.AnnAssign):
        return [node.annotation] if node.annotation is not None else []
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [node.returns] if node.returns is not None else []
    return []


def _definitions(
    tree: ast.AST, shipped: set[str], inside: str = "", away: bool = False
) -> Iterator[tuple[ast.AST, str, bool]]:
    """(node, the function or class it is in, whether that runs in another process) for every node; a method goes
    where its class goes."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{inside}.{child.name}" if inside else child.name
            method = isinstance(tree, ast.ClassDef)
            yield from _definitions(child, shipped, name, away or (not method and child.name in shipped))
        else:
            yield child, inside or "<module>", away
            yield from _definitions(child, shipped, inside, away)


def scripts_sleeps(path: Path) -> int:
    """Sleep calls in the string literals of a module (scripts a test runs in a process of their own)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return sum(
        len(_SLEEP_IN_TEXT.findall(node.value))
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def sleeps_of(path: Path) -> list[Sleep]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    modules, functions = _sleep_names(tree)
    shipped = shipped_names(tree)
    return [
        Sleep(path, node.lineno, where, away)
        for node, where, away in _definitions(tree, shipped)
        if isinstance(node, ast.Call) and _is_sleep(node, modules, functions)
    ]


def main(arguments: list[str]) -> int:
    folders = [Path(argument) for argument in arguments] or [Path("tests/integration")]
    paths = [path for folder in folders for path in sorted(folder.rglob("*.py"))]
    found = [sleep for path in paths for sleep in sleeps_of(path)]
    counted = [sleep for sleep in found if not sleep.shipped]
    for sleep in counted:
        print(f"{sleep.path}:{sleep.line} {sleep.function}")
    print(f"left out: {len(found) - len(counted)} in functions and classes run by workers, actors or units, "
          f"{sum(scripts_sleeps(path) for path in paths)} in scripts (string literals)")  # fmt: skip
    print(f"sleeps in integration test code: {len(counted)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
