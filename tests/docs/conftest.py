"""The documentation tier's readers: this tree's wheel, built once per run (tests/integration/fresh_install.py's
`run_wheel`, shared with the other tests that install it), and one virtual environment per pip
flavour, made the first time a page of that flavour runs and reused by the pages after it, in every test process
of the run: the first process that needs one makes it (under a file lock, in the run's shared temporary folder),
the others wait for it and use the same (a page's `pip install` of an extra then installs it once, not once per
process; tests/docs/runner.py runs such steps under the environment's lock). Before the first reader, the run's
wheelhouse, where the pages' installs find what they install (tests/docs/readers.py's `make_wheelhouse`), made the
same way: by the first process that needs it, under a lock."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs.pages import PAGES, shell_commands_of
from tests.docs.readers import FLAVOURS, Reader, install_requirements, make_reader, make_wheelhouse
from tests.integration.fresh_install import locked, run_wheel

#: What a made reader records, beside its folder (its presence says the reader is complete); the same for the
#: wheelhouse.
MADE = "reader.json"


class Readers(dict[str, Reader]):
    def __init__(self, root: Path, wheels: Callable[[], Path]) -> None:
        super().__init__()
        self._root = root
        self._wheels = wheels
        self._root.mkdir(parents=True, exist_ok=True)

    def __missing__(self, flavour: str) -> Reader:
        assert flavour in FLAVOURS, flavour
        wheels = self._wheels()
        wheelhouse = self._wheelhouse(wheels)
        with locked(self._root / f"{flavour}.lock"):
            made = self._root / flavour / MADE
            if made.exists():
                pip = json.loads(made.read_text())["pip"]
                reader = Reader(flavour, self._root / flavour / "venv", pip, wheels, wheelhouse)
            else:
                reader = make_reader(flavour, self._root / flavour, wheels, wheelhouse)
                made.write_text(json.dumps({"pip": reader.pip_version}))
        self[flavour] = reader
        return reader

    def _wheelhouse(self, wheels: Path) -> Path:
        folder = self._root / "wheelhouse"
        with locked(self._root / "wheelhouse.lock"):
            made = self._root / f"wheelhouse.{MADE}"
            if not made.exists():
                requirements = install_requirements(shell_commands_of(PAGES))
                make_wheelhouse(folder, wheels, requirements)
                made.write_text(json.dumps({"requirements": requirements}))
        return folder


@pytest.fixture(scope="session")
def reader_of(tmp_path_factory: pytest.TempPathFactory) -> Readers:
    """The run's readers: under the temporary folder every test process of the run shares (its own without
    pytest-xdist)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return Readers(shared / "doc-readers", lambda: run_wheel(tmp_path_factory).parent)
