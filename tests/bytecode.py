"""Bytecode of the tree under test, written once at the start of a run (tests/conftest.py), so that the processes a
run starts read it instead of compiling scaler's modules again, each of them.

A machine whose environment sets PYTHONDONTWRITEBYTECODE (many container images do; the machine this suite is
developed on does) never caches the bytecode of an editable install: every scheduler, worker, processor, storage
server, manager and client script a test starts compiled the modules it imports from source, about 0.05 s of CPU per
process, in thousands of processes per run (test_client_features.py alone: 21 s of CPU without the cache, 17 s with
it, the cache's writing included).
`compileall` writes the cache whatever the environment says, and Python reads it whatever the environment says.
Nothing a test checks changes: the cache is what any Python writes by default, checked against each file's time and
size, and the wheels the tests build and ship leave `__pycache__` out.

The test modules are pytest's to compile: it rewrites their asserts, and caches what it compiled only where bytecode
may be written; so each test process of a run (four in `make test`) rewrote every test module again, about 5 s of
CPU each. `write_rewritten_tests` writes pytest's cache of them once, as pytest itself writes it (its rewriting
functions, with the run's configuration), where each test process looks for it first. Those functions are pytest's
own, not its public API: where they are missing (another pytest), nothing is written and pytest rewrites as before.

pytest rewrites the asserts of its plugins' distributions too (every module of hypothesis, anyio, pytest-xdist,
platformdirs, pytest-timeout, and the plugins of this folder that pyproject.toml loads with `-p`), and caches them
only where bytecode may be written: each test process rewrote hypothesis alone (imported by the first test module
that uses it) in about 2 s of CPU. `write_rewritten_plugins` writes that cache once too, beside those modules.
"""

from __future__ import annotations

import compileall
import fnmatch
import importlib.util
import py_compile
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

#: The packages whose modules the run's processes import from this tree (the rehearsals' in their distribution's
#: folder).
TREES = ("scaler", "rehearsal/scaler_rehearsal", "tests")
#: Modules pytest compiles itself (asserts rewritten): `write_rewritten_tests`.
_PYTESTS_OWN = re.compile(r"(^|/)(test_[^/]*|conftest)\.py$")


def write_bytecode(root: Path) -> None:
    """Compile what is not compiled yet (or changed since), quietly; a file that does not compile is left to the
    tests that import it to report."""
    for tree in TREES:
        compileall.compile_dir(
            root / tree, quiet=2, rx=_PYTESTS_OWN, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP
        )


def write_rewritten_tests(config: pytest.Config, root: Path) -> int:
    """pytest's cache of the rewritten test modules and conftest files under `root`/tests, for those not cached yet
    (or changed since); returns how many it wrote."""
    patterns = [*config.getini("python_files"), "conftest.py"]
    sources = (
        source
        for source in sorted((root / "tests").rglob("*.py"))
        if any(fnmatch.fnmatch(source.name, pattern) for pattern in patterns)
    )
    return _write_rewritten(config, sources)


def write_rewritten_plugins(config: pytest.Config) -> int:
    """pytest's cache of the modules it rewrites as parts of plugins (those it marked for rewriting: each marked name
    is a module, or a package and every module below it), for those not cached yet (or changed since); returns how
    many it wrote."""
    try:
        marked = sorted(config.pluginmanager.rewrite_hook._must_rewrite)  # type: ignore[attr-defined]
    except AttributeError:
        return 0
    sources: list[Path] = []
    for name in marked:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.origin is None:
            continue
        if spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                sources += sorted(Path(folder).rglob("*.py"))
        elif spec.origin.endswith(".py"):
            sources.append(Path(spec.origin))
    return _write_rewritten(config, sources)


def _write_rewritten(config: pytest.Config, sources: Iterable[Path]) -> int:
    """pytest's cache of `sources` rewritten, as pytest writes it, for those not cached yet (or changed since)."""
    if config.getoption("assertmode", "rewrite") != "rewrite":
        return 0
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        read, compiled, write = rewrite._read_pyc, rewrite._rewrite_test, rewrite._write_pyc
        folder_of, tail = rewrite.get_cache_dir, rewrite.PYC_TAIL
    except (ImportError, AttributeError, KeyError):
        return 0
    written = 0
    for source in sources:
        pyc = folder_of(source) / (source.name[:-3] + tail)
        if read(source, pyc) is not None:
            continue
        try:
            source_stat, code = compiled(source, config)
        except (SyntaxError, ValueError):
            continue  # reported by the process that imports it
        try:
            pyc.parent.mkdir(exist_ok=True)
        except OSError:
            continue  # a folder this run cannot write: pytest rewrites that module as before
        written += bool(write(state, code, source_stat, pyc))
    return written
