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
"""

from __future__ import annotations

import compileall
import fnmatch
import py_compile
import re
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
    if config.getoption("assertmode", "rewrite") != "rewrite":
        return 0
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        read, compiled, write = rewrite._read_pyc, rewrite._rewrite_test, rewrite._write_pyc
        folder_of, tail = rewrite.get_cache_dir, rewrite.PYC_TAIL
    except (ImportError, AttributeError, KeyError):
        return 0
    patterns = [*config.getini("python_files"), "conftest.py"]
    written = 0
    for source in sorted((root / "tests").rglob("*.py")):
        if not any(fnmatch.fnmatch(source.name, pattern) for pattern in patterns):
            continue
        pyc = folder_of(source) / (source.name[:-3] + tail)
        if read(source, pyc) is not None:
            continue
        try:
            source_stat, code = compiled(source, config)
        except SyntaxError:
            continue  # reported by the test process that imports it
        pyc.parent.mkdir(exist_ok=True)
        written += bool(write(state, code, source_stat, pyc))
    return written
