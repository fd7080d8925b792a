"""A fresh install of this working tree, as a user's `pip install` makes it: the package's wheel, built from the
tree, unpacked into a new virtual environment, with nothing of the clone on the path (#34).

Building the wheel is what proves that the example files and the other package data ship; running from the new
environment (never from the repository) is what proves that the README and `scaler --example` work without a
clone. The new environment gets the dependencies from this one's site-packages through a `.pth` line, which adds
that folder to the path without running its `.pth` files, so the editable install of the clone stays out of it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from (pyproject.toml names README.md as the long description).
SOURCES = ("pyproject.toml", "README.md", "scaler")


def build_wheel(into: Path) -> Path:
    """The wheel of the working tree, built from a copy of it (the build writes `build/` next to its sources)."""
    source = into / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    wheels = into / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(wheels), str(source)],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert built.returncode == 0, f"building the wheel failed:\n{built.stdout}\n{built.stderr}"
    (wheel,) = wheels.glob("*.whl")
    return wheel


def fresh_environment(root: Path) -> Path:
    """A new virtual environment with the wheel installed; returns its Python."""
    wheel = build_wheel(root / "build")
    environment = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=120)
    python = environment / "bin" / "python"
    site_packages = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
    )  # fmt: skip
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site_packages)
    ours = dict.fromkeys(sysconfig.get_paths()[kind] for kind in ("purelib", "platlib"))  # compiled ones in platlib
    (site_packages / "dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    where = subprocess.run(
        [str(python), "-c", "import scaler; print(scaler.__file__)"],
        capture_output=True, text=True, timeout=60, cwd=root,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(site_packages), f"scaler imported from {where.stdout}"
    return python
