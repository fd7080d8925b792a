"""The reader's machine the documentation tier runs each page on: a virtual environment made outside the repository
with the pip a fresh one has (`bundled`) or with a current pip (`current`), and this tree's wheel installed as the
README says until the package is published (`pip install ~/scaler-wheels/scaler_compute-*.whl
~/scaler-wheels/scaler_rehearsal-*.whl`: the product's and its rehearsals').

Each page gets a home of its own (its `~`: fresh keys in `~/.config/scaler`, the README's `~/scaler-wheels`), and a
working folder in it. Only download caches are shared with the machine's (pip's, uv's, the fake cloud units'), so
that pages do not download the same packages again; nothing that changes what a command does is.

The reader's pip does not compile what it installs to bytecode (`NO_COMPILE`): compiling was most of an install's
time (63% of the samples of migrating.md's `pip install "scaler-compute[joblib,dask]"` under pip 23.2.1, in py-spy),
and nothing a page checks depends on it: pip goes on past a file that does not compile, and Python compiles a module
the first time it imports it. It caches what it compiled, as on a reader's machine: the test session's
PYTHONDONTWRITEBYTECODE (the machine this suite is developed on sets it) is not the reader's, and with it every
process of a page compiled again every module it imported (a process importing scikit-learn's SVC and dask.array:
7.2 s of CPU from source, 3.1 s from the cache).

The pages' `pip install` commands (and the reader's own install of the wheels) find what they install in the run's
wheelhouse (`make_wheelhouse`: a wheel of every requirement the pages install, made once per run by the test
environment's pip, which resolves them against the index), with no index (`install_environment`): each install is the
page's command as written, run by the flavour's pip, which resolves the requirements and installs them, but it does
not read the index's pages. Reading them was most of an install's CPU: `pip install "scaler-compute[fake-cloud]"`
under pip 23.2.1 took 5.9 CPU-s from the index and 1.9 s from the wheelhouse (the index's pages of boto3 and
botocore list thousands of files, each one parsed and compared), and the wheelhouse of every page's requirements took
2.8 s. Only those commands: whatever else the page runs (a cloud manager asking the reader's pip whether the index has
the units' requirements) sees the index as the reader's does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.integration.fresh_install import venv_with_pip

#: How a pip flavour's environment gets its pip.
FLAVOURS = ("bundled", "current")
#: Where the README tells readers to put the wheels until the package is on PyPI (`~/scaler-wheels`).
WHEEL_FOLDER = "scaler-wheels"
#: The README's install command until the package is on PyPI.
INSTALL = f"pip install --quiet ~/{WHEEL_FOLDER}/scaler_compute-*.whl ~/{WHEEL_FOLDER}/scaler_rehearsal-*.whl"
#: Download caches of the machine a page's home links to (under ~/.cache).
_SHARED_CACHES = ("pip", "uv", "scaler-fake-cloud")
#: What the reader's pip is told through its environment: install without compiling to bytecode (the module's
#: docstring says why). pip reads `PIP_NO_COMPILE=1` as "compile" (its negated options' known inversion), so the
#: option's own name says it.
NO_COMPILE = {"PIP_COMPILE": "0"}
#: Variables of the test session a reader's shell does not have.
_NOT_THE_READERS = ("SCALER_", "PYTEST_", "XDG_", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE",
                    "COV_")  # fmt: skip


@dataclass(frozen=True)
class Reader:
    flavour: str
    venv: Path
    pip_version: str
    wheels: Path  #: the folder with this tree's wheels
    wheelhouse: Path | None = None  #: where the page's installs find what they install (`make_wheelhouse`)

    @property
    def install_environment(self) -> dict[str, str]:
        """What a page's `pip install` runs with, beside the reader's environment: the wheelhouse and no index."""
        return {} if self.wheelhouse is None else installs_from(self.wheelhouse)

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def page_environment(self, home: Path) -> dict[str, str]:
        """A reader's shell for one page: their home (with the README's `~/scaler-wheels`) and their activated
        environment."""
        home.mkdir(parents=True, exist_ok=True)
        _link(home / WHEEL_FOLDER, self.wheels)
        real_cache = Path.home() / ".cache"
        for name in _SHARED_CACHES:
            (real_cache / name).mkdir(parents=True, exist_ok=True)
            _link(home / ".cache" / name, real_cache / name)
        ours = str(Path(sys.executable).parent)
        path = [str(self.venv / "bin"), *(entry for entry in os.environ.get("PATH", "").split(os.pathsep)
                                           if entry and entry != ours)]  # fmt: skip
        environment = {name: value for name, value in os.environ.items() if not name.startswith(_NOT_THE_READERS)}
        (home / "tmp").mkdir(exist_ok=True)  # what a page leaves in the temporary folder goes with its home
        environment.update(HOME=str(home), PATH=os.pathsep.join(path), VIRTUAL_ENV=str(self.venv),
                           TMPDIR=str(home / "tmp"), **NO_COMPILE)  # fmt: skip
        if "PYENV_ROOT" not in environment and (Path.home() / ".pyenv").is_dir():
            environment["PYENV_ROOT"] = str(Path.home() / ".pyenv")  # where the fake cloud finds its Pythons
        return environment


def make_reader(flavour: str, root: Path, wheels: Path, wheelhouse: Path | None = None) -> Reader:
    """A virtual environment of the flavour with `scaler-compute` installed from the wheel folder, as the README
    says to install it."""
    venv = root / "venv"
    python = str(bare_environment(flavour, venv))
    reader = Reader(flavour, venv, "", wheels, wheelhouse)
    environment = {**reader.page_environment(root / "home"), **reader.install_environment}
    _run(["bash", "-c", INSTALL], 900, environment, cwd=root / "home")
    return Reader(flavour, venv, pip_version(python), wheels, wheelhouse)


def installs_from(wheelhouse: Path) -> dict[str, str]:
    """pip's settings, through its environment, to install from the wheelhouse alone (over the machine's own
    `find-links`, and its index and extra indexes, which `PIP_NO_INDEX` turns off)."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}


def install_requirements(commands: Iterable[str]) -> list[str]:
    """What the `pip install` commands among `commands` ask for, in order and once each: their arguments less the
    options and the README's wheels (`~/scaler-wheels/...`, which the wheelhouse gets as files)."""
    found: list[str] = []
    for command in commands:
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            words = command.split()
        for at in range(len(words) - 1):
            if Path(words[at]).name in ("pip", "pip3") and words[at + 1] == "install":
                for word in words[at + 2 :]:
                    if word in ("&&", "||", ";", "|"):
                        break
                    if not word.startswith("-") and not word.startswith(f"~/{WHEEL_FOLDER}/") and word not in found:
                        found.append(word)
    return found


def make_wheelhouse(folder: Path, wheels: Path, requirements: list[str]) -> Path:
    """A folder with this tree's wheels and a wheel of every distribution that `requirements` need, for this Python
    and platform: by the test environment's pip (one resolve, against the machine's index; the files come from pip's
    cache when an earlier run fetched them). Wheels, not what the index offers: an install from a source
    distribution with no index could not get the tools that build it."""
    folder.mkdir(parents=True, exist_ok=True)
    local = sorted(str(wheel) for wheel in wheels.glob("*.whl"))
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(folder), *local, *requirements], 900,
         {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})  # fmt: skip
    return folder


def bare_environment(flavour: str, venv: Path) -> Path:
    """A new virtual environment with what `python -m venv` puts in it (ensurepip's pip and, on Python 3.11, its
    setuptools), and with the current flavour, its pip upgraded as a reader upgrades it; returns its Python. Made by
    uv where the test extra's is there (ensurepip took 12 to 20 s of a loaded machine compiling pip:
    `venv_with_pip`); uv upgrades the pip, from its cache."""
    python = venv_with_pip(venv, "bundled")
    if flavour == "current":
        uv = Path(sys.executable).with_name("uv")
        installer = (
            [str(uv), "pip", "install", "--python", str(python)]
            if uv.exists()
            else [str(python), "-m", "pip", "install"]
        )
        _run([*installer, "--quiet", "--upgrade", "pip"], 300, {**os.environ, **NO_COMPILE})
    return python


def pip_version(python: str) -> str:
    return _run([python, "-m", "pip", "--version"], 60).split()[1]


def _run(argv: list[str], timeout: float, environment: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=environment, cwd=cwd,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(target, target_is_directory=True)
