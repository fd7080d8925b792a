"""A fresh install of this working tree, as a user's `pip install` makes it: the package's wheels (the product's and
its rehearsals'), built from the tree, unpacked into a new virtual environment, with nothing of the clone on the
path (#34).

Building the wheel is what proves that the example files and the other package data ship; running from the new
environment (never from the repository) is what proves that the README and `scaler --example` work without a
clone. The new environment gets the dependencies from this one's site-packages through a `.pth` line, which adds
that folder to the path without running its `.pth` files, so the editable install of the clone stays out of it.

The wheel is built once per run (`run_wheel`) and shared by every test process and every test that installs it (the
fresh environments here, the documentation tier's readers, the folder of links of test_find_links_install.py): each
build is of the same tree, and each took about 12 s of a loaded machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What the wheels are built from (pyproject.toml names README.md as the long description): the product's, then its
#: rehearsals' (rehearsal/, the second distribution).
SOURCES = ("pyproject.toml", "README.md", "scaler", "rehearsal")
#: The wheel of the product, in a folder of this tree's wheels.
PRODUCT_WHEEL = "scaler_compute-*.whl"


def build_wheel(into: Path) -> Path:
    """The wheels of the working tree, the product's and its rehearsals', built from a copy of it (the build writes
    `build/` next to its sources) into one folder, as the README's "First steps" build them; returns the
    product's."""
    source = into / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
            shutil.copytree(path, source / name, ignore=ignored)
        else:
            shutil.copy2(path, source / name)
    wheels = into / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(wheels), str(source),
         str(source / "rehearsal")],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert built.returncode == 0, f"building the wheels failed:\n{built.stdout}\n{built.stderr}"
    (wheel,) = wheels.glob(PRODUCT_WHEEL)
    return wheel


def run_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the working tree for this run: built by the first test process that asks (under a file lock in
    the temporary folder the run's test processes share), found there by the others."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "tree-wheel"
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / "build.lock"):
        built = sorted((root / "build" / "wheels").glob(PRODUCT_WHEEL))
        if built:
            return built[0]
        shutil.rmtree(root / "build", ignore_errors=True)  # a build cut short in another process
        return build_wheel(root / "build")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` shared by the run's test processes (flock), held for the block."""
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def fresh_environment(root: Path, wheel: Path, base: Path | None = None) -> Path:
    """A new virtual environment with the wheel and the others of its folder (the rehearsals') installed; returns
    its Python. `base`: the Python of another environment (another Python version's), whose interpreter makes the
    new one and whose installed dependencies it takes; this one's by default."""
    environment = root / "venv"
    base_python = str(base) if base is not None else sys.executable
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=120)
    python = environment / "bin" / "python"
    site_packages = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
    )  # fmt: skip
    for each in sorted(wheel.parent.glob("*.whl")):
        with zipfile.ZipFile(each) as archive:
            archive.extractall(site_packages)
    ours = dict.fromkeys(_site_folders(base_python))  # compiled ones in platlib
    (site_packages / "dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    where = subprocess.run(
        [str(python), "-c", "import scaler; print(scaler.__file__)"],
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(site_packages), f"scaler imported from {where.stdout}"
    return python


def venv_with_pip(folder: Path, pip: str = "bundled") -> Path:
    """A new virtual environment of this Python with pip in it, made by uv (the test extra's) in about a second,
    where `python -m venv`'s ensurepip took 12 to 20 s of a loaded machine, most of it compiling pip. `pip`:
    "bundled", what `python -m venv` puts in it (the pip, and on Python 3.11 the setuptools, that ensurepip bundles);
    "current", the newest pip (`uv venv --seed`). `python -m venv` where uv or the bundled wheels are missing.
    Returns its Python."""
    import ensurepip

    python = folder / "bin" / "python"
    uv = Path(sys.executable).with_name("uv")
    bundled = sorted(str(wheel) for wheel in (Path(ensurepip.__file__).parent / "_bundled").glob("*.whl"))
    if not (uv.exists() and any(Path(wheel).name.startswith("pip-") for wheel in bundled)):
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300, capture_output=True)
        if pip == "current":  # the newest pip, as `uv venv --seed` gives it
            upgrade = [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"]
            subprocess.run(upgrade, check=True, timeout=300, capture_output=True)
        return python
    base = getattr(sys, "_base_executable", sys.executable)
    made = [str(uv), "venv", "--quiet", *(["--seed"] if pip == "current" else []), "--python", base, str(folder)]
    subprocess.run(made, check=True, timeout=300, capture_output=True)
    if pip == "bundled":
        seeded = [str(uv), "pip", "install", "--quiet", "--offline", "--python", str(python), *bundled]
        subprocess.run(seeded, check=True, timeout=300, capture_output=True)
    return python


def _site_folders(python: str) -> list[str]:
    """Where `python` finds its installed distributions: purelib, then platlib."""
    if python == sys.executable:
        return [sysconfig.get_paths()[kind] for kind in ("purelib", "platlib")]
    asked = "import sysconfig; print(sysconfig.get_paths()['purelib']); print(sysconfig.get_paths()['platlib'])"
    done = subprocess.run([python, "-c", asked], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.split()


#: A console script run by its entry point (a fresh environment has the wheel's files, not its scripts):
#: `python -c RUN_COMMAND NAME ARGS...`.
RUN_COMMAND = """
import sys
from importlib.metadata import entry_points

(script,) = [s for s in entry_points(group="console_scripts") if s.name == sys.argv[1]]
sys.argv = sys.argv[1:]
sys.exit(script.load()())
"""
