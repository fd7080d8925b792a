"""The cores stay pure: no clock, randomness, sockets, event loops or processes inside them (style.md
point 1). Each module is parsed, not imported, so a test failure names the import that broke the rule."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPOSITORY = Path(__file__).resolve().parents[2]
ROOT = REPOSITORY / "scaler"

#: the import-linter contract in pyproject.toml whose source modules are the pure ones: the one list of them
PURE_CONTRACT = "Pure cores import no I/O, no event loop, no clock and no randomness"


def pure_module_names() -> list[str]:
    contracts = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    found = [contract for contract in contracts if contract["name"] == PURE_CONTRACT]
    assert len(found) == 1, f"pyproject.toml has no import-linter contract named {PURE_CONTRACT!r}"
    names: list[str] = found[0]["source_modules"]
    return names


def files_of(module: str) -> list[Path]:
    """The source files of a module, or of every module of a package."""
    path = REPOSITORY.joinpath(*module.split("."))
    if path.is_dir():
        return sorted(path.rglob("*.py"))
    return [path.with_suffix(".py")] if path.with_suffix(".py").is_file() else []


PURE_MODULES = sorted(path for module in pure_module_names() for path in files_of(module))

BANNED = ("time", "datetime", "random", "asyncio", "zmq", "socket", "subprocess", "psutil", "threading",
          "scaler.io", "scaler.protocol.codec")  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", PURE_MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_core_module_imports_nothing_impure(path: Path) -> None:
    offending = sorted(
        name for name in imported_modules(path) for banned in BANNED if name == banned or name.startswith(banned + ".")
    )
    assert not offending, f"{path.relative_to(ROOT)} imports {offending}"


def test_the_list_of_pure_modules_is_not_empty_and_names_modules_that_exist() -> None:
    assert len(PURE_MODULES) > 10
    missing = [module for module in pure_module_names() if not files_of(module)]
    assert not missing, f"pyproject.toml's pure modules that do not exist: {missing}"
