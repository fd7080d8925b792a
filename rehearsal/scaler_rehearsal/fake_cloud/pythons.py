"""The Python interpreters this machine has, by major.minor: what the fake cloud's units may run.

A unit never runs the laptop's interpreter or virtual environment: it gets a fresh virtual environment made from
an interpreter of the version its launch declares. Interpreters come from pyenv (`$PYENV_ROOT/versions/X.Y.Z`,
the highest patch of each minor) and from `python3.X` on the fake cloud's own PATH (the system's), in that order.
Which versions a unit may ask for is the image's or the AMI's business (`images.py`, `ami.py`), not this module's.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

#: `3.12`, `3.12.11`: a version a launch may declare (a patch is accepted; units run the machine's patch).
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")
#: The minor versions looked for on PATH.
_PATH_MINORS = tuple(f"3.{minor}" for minor in range(6, 20))


def major_minor(version: str) -> str | None:
    """`3.12.11` -> `3.12`; None when `version` is not one."""
    found = _VERSION.match(version.strip())
    return f"{found.group(1)}.{found.group(2)}" if found else None


def machine_interpreters(search_path: str | None = None) -> dict[str, Path]:
    """major.minor -> an interpreter of that version on this machine (pyenv first, then PATH)."""
    found: dict[str, tuple[tuple[int, ...], Path]] = {}
    for root in _pyenv_roots():
        for directory in sorted((root / "versions").glob("[0-9]*.[0-9]*.[0-9]*")):
            parts = directory.name.split(".")
            if not all(part.isdigit() for part in parts):
                continue  # 3.13.0t, 3.12-dev ...: not a plain CPython release
            minor = f"{parts[0]}.{parts[1]}"
            binary = directory / "bin" / f"python{minor}"
            patch = tuple(int(part) for part in parts)
            if binary.is_file() and os.access(binary, os.X_OK) and patch > found.get(minor, ((), binary))[0]:
                found[minor] = (patch, binary)
    chosen = {minor: path for minor, (_patch, path) in found.items()}
    for minor in _PATH_MINORS:
        if minor in chosen:
            continue
        located = shutil.which(f"python{minor}", path=search_path or _path_without_shims())
        if located is not None:
            chosen[minor] = Path(located)
    return dict(sorted(chosen.items(), key=lambda item: tuple(int(part) for part in item[0].split("."))))


def _pyenv_roots() -> list[Path]:
    roots = [Path(os.environ["PYENV_ROOT"])] if os.environ.get("PYENV_ROOT") else []
    roots.append(Path.home() / ".pyenv")
    return [root for index, root in enumerate(roots) if root.is_dir() and root not in roots[:index]]


def _path_without_shims() -> str:
    """PATH without pyenv's shims and virtual environments' bin folders (they only point at what is above)."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    virtual = os.environ.get("VIRTUAL_ENV")
    kept = [entry for entry in entries if "/.pyenv/" not in entry and not (virtual and entry.startswith(virtual))]
    return os.pathsep.join(kept)
