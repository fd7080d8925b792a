"""Wheels of local distributions (an editable install, a fork, a path install), made here from the files that
run here, so that a unit installs exactly this copy.

No build backend runs: the wheel is packed from what is installed. An editable install's modules come from its
source folders (found as Python imports them), its metadata from the installed metadata; any other install's
files are the ones its RECORD lists. The archive is deterministic (sorted names, fixed times), so the same
sources give the same bytes and the same sha256, which names it in the cache here and in the manager's bucket:
an unchanged build is packed in a fraction of a second and uploaded once.

Every change of an editable install's sources makes a new wheel; a wheel's folder is touched each time it is
shipped, and folders untouched for `KEEP_SECONDS` are removed when a new wheel is made, so the cache holds what
was shipped lately rather than every build since the first.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import os
import platform
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from scaler.worker_manager.ship.distributions import Installed

#: Files never packed: caches and what pip writes at install time (the unit's pip writes its own).
_SKIPPED_PARTS = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"})
_INSTALL_ONLY = frozenset({"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"})
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
#: A cached wheel not shipped for this long is removed when the next new wheel is made (a week).
KEEP_SECONDS = 7 * 24 * 3600.0


class WheelError(ValueError):
    """A local distribution that cannot be packed for a unit; the message names it and says why."""


@dataclass(frozen=True, slots=True)
class Wheel:
    distribution: str
    version: str
    path: Path  #: in the local cache, named as pip expects (`name-version-tag.whl`)
    sha256: str
    import_names: tuple[str, ...]

    @property
    def filename(self) -> str:
        return self.path.name


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scaler" / "wheels"


def wheel_of(installed: Installed, cache: Path | None = None) -> Wheel:
    """This copy of `installed` as a wheel in `cache` (packed again only when its files changed)."""
    files = _editable_files(installed) if installed.editable else _recorded_files(installed)
    if not files:
        raise WheelError(f"{installed.pin}: no files of it found to ship (is it installed correctly?)")
    tag = _tag(installed, files)
    name = re.sub(r"[^\w\d.]+", "_", installed.name)
    info = f"{name}-{installed.version}.dist-info"
    contents = {arcname: path.read_bytes() for arcname, path in files.items()}
    contents.update(_metadata(installed, info, tag))
    data = _archive(contents, info)
    digest = hashlib.sha256(data).hexdigest()
    folder = (cache or default_cache()) / digest[:32]
    path = folder / f"{name}-{installed.version}-{tag}.whl"
    if not _reused(folder, path):
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(path)
        _remove_stale(folder.parent, keep=folder)
    return Wheel(installed.name, installed.version, path, digest, installed.import_names)


def _editable_files(installed: Installed) -> dict[str, Path]:
    """The source files of an editable install's top-level packages and modules, as Python finds them."""
    files: dict[str, Path] = {}
    for top in installed.import_names:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise WheelError(f"{installed.pin} (editable): its module {top!r} cannot be found from here")
        if spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations)))
            for path in sorted(root.rglob("*")):
                relative = path.relative_to(root)
                if path.is_file() and not _SKIPPED_PARTS.intersection(relative.parts) and path.suffix != ".pyc":
                    files[f"{top}/{relative.as_posix()}"] = path
        elif spec.origin and os.path.isfile(spec.origin):
            files[Path(spec.origin).name] = Path(spec.origin)
    return files


def _recorded_files(installed: Installed) -> dict[str, Path]:
    """The files a regular install's RECORD lists, inside the installation folder (scripts outside it are made
    again by the unit's pip from entry_points.txt)."""
    files: dict[str, Path] = {}
    for entry in installed.distribution.files or ():
        parts = Path(str(entry)).parts
        if not parts or parts[0] == ".." or _SKIPPED_PARTS.intersection(parts) or str(entry).endswith(".pyc"):
            continue
        if parts[0].endswith((".dist-info", ".egg-info")):
            continue  # the metadata is written afresh (`_metadata`)
        path = Path(str(installed.distribution.locate_file(entry)))
        if path.is_file():
            files[Path(str(entry)).as_posix()] = path
    return files


def _tag(installed: Installed, files: dict[str, Path]) -> str:
    compiled = [name for name in files if name.endswith((".so", ".pyd", ".dylib"))]
    if not compiled:
        return "py3-none-any"
    if installed.wheel_tags and not installed.editable:
        return installed.wheel_tags[0]
    if sys.platform != "linux" or platform.machine() != "x86_64":
        raise WheelError(
            f"{installed.pin}: a local build with compiled code for this machine ({sys.platform} "
            f"{platform.machine()}, {compiled[0]}) cannot run on a Linux x86_64 unit; install it there another way "
            '(environment = "requirements") or leave it out (environment_exclude)'
        )
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{python}-{python}-linux_x86_64"


def _metadata(installed: Installed, info: str, tag: str) -> dict[str, bytes]:
    distribution = installed.distribution
    metadata = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO") or ""
    if not metadata:
        raise WheelError(f"{installed.pin}: its metadata (METADATA) cannot be read")
    pure = "true" if tag.endswith("-none-any") else "false"
    contents = {
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: scaler\nRoot-Is-Purelib: {pure}\nTag: {tag}\n".encode(),
        f"{info}/top_level.txt": "".join(f"{name}\n" for name in installed.import_names).encode(),
    }
    entry_points = distribution.read_text("entry_points.txt")
    if entry_points:
        contents[f"{info}/entry_points.txt"] = entry_points.encode()
    return {name: data for name, data in contents.items() if name.rsplit("/", 1)[-1] not in _INSTALL_ONLY}


def _archive(contents: dict[str, bytes], info: str) -> bytes:
    record = []
    for name in sorted(contents):
        digest = base64.urlsafe_b64encode(hashlib.sha256(contents[name]).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(contents[name])}")
    record.append(f"{info}/RECORD,,")
    contents = {**contents, f"{info}/RECORD": ("\n".join(record) + "\n").encode()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(contents):  # the dist-info folder sorts after the packages: pip reads it last
            entry = zipfile.ZipInfo(name, _FIXED_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, contents[name])
    return buffer.getvalue()


def wheel_of_file(path: Path, cache: Path | None = None) -> Wheel:
    """A wheel file given as a requirement, shipped as it is (copied into the cache under its sha256)."""
    if not path.is_file():
        raise WheelError(f"{path}: no such wheel file (a requirement ending in .whl is a local file)")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    folder = (cache or default_cache()) / digest[:32]
    copy = folder / path.name
    if not _reused(folder, copy):
        folder.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(data)
        _remove_stale(folder.parent, keep=folder)
    name, _, rest = path.name.partition("-")
    return Wheel(name, rest.split("-", 1)[0], copy, digest, (name.lower(),))


def _reused(folder: Path, path: Path) -> bool:
    """Whether the wheel is cached already; if so its folder is marked as shipped now."""
    if not path.is_file():
        return False
    try:
        os.utime(folder)
    except OSError:
        pass
    return True


def _remove_stale(cache: Path, keep: Path) -> None:
    """The cache's wheel folders not shipped for `KEEP_SECONDS` (a manager still shipping one touches it)."""
    import shutil
    import time

    oldest = time.time() - KEEP_SECONDS
    try:
        folders = [entry for entry in os.scandir(cache) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for entry in folders:
        try:
            stale = entry.path != str(keep) and entry.stat(follow_symlinks=False).st_mtime < oldest
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry.path, ignore_errors=True)
