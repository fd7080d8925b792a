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
"""

from __future__ import annotations

import compileall
import py_compile
from pathlib import Path

#: The packages whose modules the run's processes import from this tree.
TREES = ("scaler", "tests")


def write_bytecode(root: Path) -> None:
    """Compile what is not compiled yet (or changed since), quietly; a file that does not compile is left to the
    tests that import it to report."""
    for tree in TREES:
        compileall.compile_dir(
            root / tree, quiet=2, workers=1, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP
        )
