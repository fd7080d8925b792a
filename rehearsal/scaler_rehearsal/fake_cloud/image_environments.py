"""The images' own environments: what docker/worker.Dockerfile makes at build time (`SCALER_IMAGE_VENV`), made here
once per image, when a container of the image first starts (which waits for it, as the first task on a host waits
for its image's pull; the containers of other images and the runners' steps wait too, once, when an ECS task is the
first).

An image's environment is a virtual environment of its default Python with its baked requirements installed and
their bytecode compiled. A container of the image's Python that lists no requirements runs in it as it is (the
entrypoint makes and installs nothing); any other makes a fresh environment in its own folder. The
entrypoint never writes into the image's environment, which is how the fake cloud's units, local processes that
all see the same folder, keep a filesystem of their own without a copy or an overlay per container: what differs
between two containers of one image is only ever in a fresh environment of their own.

With a cache folder (the fake cloud's cache directory, `image-environments/`), an environment is kept for every cloud
after the one that made it, as a machine keeps the images it pulled: it is named by a digest of what makes it (the
image's Python, that interpreter's file, the baked requirements and the files they name), so that another build of
a baked wheel makes another; a file lock makes clouds that start at once wait for one making; one that no cloud used
for `KEEP_SECONDS` is removed when another is made. Making one costs seconds of CPU (the Batch jobs' image: this
build with boto3, installed and compiled), at each start of a cloud otherwise.

An image whose environment cannot be made (its Python is not on this machine, an install that fails) has none:
its containers make a fresh environment each, and the entrypoint names what fails there.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import shutil
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

from scaler_rehearsal.fake_cloud.images import Image

logger = logging.getLogger(__name__)

#: How long making one image's environment may take (an install from the index through the cloud's mirror); past
#: it the image has none.
MAKE_TIMEOUT_SECONDS = 120.0
#: A cached environment no cloud used for this long is removed when another is made (two days).
KEEP_SECONDS = 2 * 24 * 3600.0
#: The file a complete environment's folder has (written last; touched at each use).
READY = "ready"


class ImageEnvironments:
    """The images' environments of one cloud, made with `uv`: under `root` (one folder per repository, the cloud's
    own), or under `cache` (one folder per digest, shared by the clouds of this machine) when there is one."""

    def __init__(self, root: Path, interpreters: dict[str, Path], uv: Path, cache: Path | None = None) -> None:
        self._root = root
        self._interpreters = interpreters
        self._uv = uv
        self._cache = cache
        self._made: dict[Image, Path | None] = {}
        self._lock = threading.Lock()

    def of(self, image: Image, environment: dict[str, str]) -> Path | None:
        """The image's environment, made at the first call (installing with `environment`: the index, the cache);
        None when it cannot be made (why is logged)."""
        with self._lock:
            if image not in self._made:
                self._made[image] = self._find_or_make(image, environment)
            return self._made[image]

    def made(self, repository: str) -> Path | None:
        """The environment made for the image of `repository`, if one was."""
        with self._lock:
            return next((venv for image, venv in self._made.items() if image.repository == repository), None)

    def _find_or_make(self, image: Image, environment: dict[str, str]) -> Path | None:
        python = self._interpreters.get(image.default_python)
        if python is None:
            logger.info("the %s image has no environment of its own: no Python %s on this machine",
                        image.repository, image.default_python)  # fmt: skip
            return None
        if self._cache is None:
            return self._make(image, python, self._root / image.repository, environment)
        folder = self._cache / f"{image.repository}-{_digest(image, python)}"
        self._cache.mkdir(parents=True, exist_ok=True)
        with open(folder.with_name(f"{folder.name}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another cloud making the same environment: wait for it
            if (folder / READY).exists():
                (folder / READY).touch()
                logger.info("the %s image's environment: %s (made before)", image.repository, folder / "venv")
                return folder / "venv"
            venv = self._make(image, python, folder, environment)
            if venv is not None:
                (folder / READY).touch()
                _remove_stale(self._cache, keep=folder)
            return venv

    def _make(self, image: Image, python: Path, folder: Path, environment: dict[str, str]) -> Path | None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        venv = folder / "venv"
        commands = [[str(self._uv), "venv", "--quiet", "--no-config", "--python", str(python), str(venv)]]
        requirements = _requirements(image.baked_requirements)
        if requirements:
            listed = folder / "requirements.txt"
            listed.write_text("".join(f"{line}\n" for line in requirements))
            commands.append([str(self._uv), "pip", "install", "--quiet", "--no-config", "--compile-bytecode",
                             "--python", str(venv / "bin" / "python"), "-r", str(listed)])  # fmt: skip
        for command in commands:
            try:
                done = subprocess.run(command, env=environment, cwd=folder, capture_output=True, text=True,
                                      timeout=MAKE_TIMEOUT_SECONDS)  # fmt: skip
            except (OSError, subprocess.TimeoutExpired) as error:
                problem = str(error)
            else:
                if done.returncode == 0:
                    continue
                problem = done.stderr.strip()[-600:]
            logger.warning("the %s image has no environment of its own (its containers make one each): %s",
                           image.repository, problem)  # fmt: skip
            shutil.rmtree(folder, ignore_errors=True)
            return None
        logger.info("the %s image's environment: %s (Python %s)", image.repository, venv, image.default_python)
        return venv


def _digest(image: Image, python: Path) -> str:
    """What makes the image's environment: its Python (the interpreter's file), its baked requirements, and the local
    files they name (a wheel built again under the same name is another environment)."""
    parts = [image.default_python, str(python.resolve()), _stamp(python.resolve()), image.baked_requirements]
    for line in _requirements(image.baked_requirements):
        _name, at, url = line.partition(" @ ")
        if at and url.strip().startswith("file:"):
            parts.append(_stamp(Path(urllib.parse.unquote(urllib.parse.urlsplit(url.strip()).path))))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    try:
        status = path.stat()
    except OSError:
        return "missing"
    return f"{status.st_size}:{status.st_mtime_ns}"


def _remove_stale(cache: Path, keep: Path) -> None:
    """The cached environments no cloud used for KEEP_SECONDS, each only when no cloud is making it."""
    oldest = time.time() - KEEP_SECONDS
    for folder in cache.iterdir():
        if folder == keep or not folder.is_dir():
            continue
        try:
            stale = (folder / READY).stat().st_mtime < oldest
        except OSError:
            stale = folder.stat().st_mtime < oldest  # never completed
        if not stale:
            continue
        with contextlib.suppress(OSError), open(folder.with_name(f"{folder.name}.lock"), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # being made or checked right now
            shutil.rmtree(folder, ignore_errors=True)


def _requirements(text: str) -> list[str]:
    """The entrypoint's reading of a requirements variable: newline-separated when it has a newline, else `;`."""
    lines = text.splitlines() if "\n" in text else text.split(";")
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
