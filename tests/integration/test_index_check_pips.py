"""#38 finding 4: the cloud managers' index check works with the pip a fresh virtual environment has (23.2, which
takes `--platform` only with `--target`) and with a current one: a package the index has passes, one it has not is
named. It asks the real package index this machine's pip is configured with.

Checked by switching the mechanism off: without `--target` in `index_check._ask`, pip 23.2 refuses the question,
the check blames nothing and the old-pip case fails (the missing package is not named); before the fix it blamed
tomli-w instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scaler.worker_manager.ship.index_check import unavailable
from scaler.worker_manager.ship.unit_target import UnitTarget
from tests.integration.fresh_install import venv_with_pip

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: The pip `python -m venv` gives a Python 3.11 of late 2023 (the issue's fresh environment).
OLD_PIP = "23.2.1"
MISSING = "scaler-no-such-distribution-38==1.0"


@pytest.fixture(scope="module")
def old_pip(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("old-pip")
    python = str(venv_with_pip(folder))  # what `python -m venv` makes, without ensurepip's compiling
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", f"pip=={OLD_PIP}"], capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    version = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60).stdout
    assert version.startswith(f"pip {OLD_PIP} "), version
    return [python, "-m", "pip"]


@pytest.mark.parametrize("which", ["pip 23.2", "this environment's pip"])
def test_the_index_check_names_only_what_the_index_lacks(
    which: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing remembered from another run
    pip = request.getfixturevalue("old_pip") if which == "pip 23.2" else [sys.executable, "-m", "pip"]
    missing = unavailable(["tomli-w", MISSING], UnitTarget("3.11"), pip=pip)
    assert [requirement for requirement, _why in missing] == [MISSING], missing
    assert "the package index has no file of it" in missing[0][1]
