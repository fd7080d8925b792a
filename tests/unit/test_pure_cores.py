"""The cores stay pure: no clock, randomness, sockets, event loops or processes inside them (style.md
point 1). Each module is parsed, not imported, so a test failure names the import that broke the rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "scaler"

PURE_MODULES = sorted(
    [
        *(ROOT / "scheduler" / "core").glob("*.py"),
        *(path for path in (ROOT / "worker" / "agent").glob("*.py") if path.name != "shell.py"),
        ROOT / "worker" / "processor_protocol.py",
        ROOT / "worker" / "processor" / "task_line.py",
        ROOT / "worker_manager" / "reconciler.py",
        ROOT / "object_storage" / "store.py",
        *(ROOT / "policy").rglob("*.py"),
    ]
)

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


def test_the_list_of_pure_modules_is_not_empty() -> None:
    assert len(PURE_MODULES) > 10
