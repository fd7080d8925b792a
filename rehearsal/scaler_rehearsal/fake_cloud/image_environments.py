"""The images' own environments: what docker/worker.Dockerfile makes at build time (`SCALER_IMAGE_VENV`), made here
once per image and per cloud, when a container of the image first starts (which waits for it, as the first task on
a host waits for its image's pull; the containers of other images and the runners' steps wait too, once, when an
ECS task is the first).

An image's environment is a virtual environment of its default Python with its baked requirements installed and
their bytecode compiled. A container of the image's Python that lists no requirements runs in it as it is (the
entrypoint makes and installs nothing); any other makes a fresh environment in its own folder. The
entrypoint never writes into the image's environment, which is how the fake cloud's units, local processes that
all see the same folder, keep a filesystem of their own without a copy or an overlay per container: what differs
between two containers of one image is only ever in a fresh environment of their own.

An image whose environment cannot be made (its Python is not on this machine, an install that fails) has none:
its containers make a fresh environment each, and the entrypoint names what fails there.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
from pathlib import Path

from scaler_rehearsal.fake_cloud.images import Image

logger = logging.getLogger(__name__)

#: How long making one image's environment may take (an install from the index through the cloud's mirror); past
#: it the image has none.
MAKE_TIMEOUT_SECONDS = 120.0


class ImageEnvironments:
    """The images' environments of one cloud, under `root` (one folder per repository), made with `uv`."""

    def __init__(self, root: Path, interpreters: dict[str, Path], uv: Path) -> None:
        self._root = root
        self._interpreters = interpreters
        self._uv = uv
        self._made: dict[Image, Path | None] = {}
        self._lock = threading.Lock()

    def of(self, image: Image, environment: dict[str, str]) -> Path | None:
        """The image's environment, made at the first call (installing with `environment`: the index, the cache);
        None when it cannot be made (why is logged)."""
        with self._lock:
            if image not in self._made:
                self._made[image] = self._make(image, environment)
            return self._made[image]

    def _make(self, image: Image, environment: dict[str, str]) -> Path | None:
        python = self._interpreters.get(image.default_python)
        if python is None:
            logger.info("the %s image has no environment of its own: no Python %s on this machine",
                        image.repository, image.default_python)  # fmt: skip
            return None
        folder = self._root / image.repository
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


def _requirements(text: str) -> list[str]:
    """The entrypoint's reading of a requirements variable: newline-separated when it has a newline, else `;`."""
    lines = text.splitlines() if "\n" in text else text.split(";")
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
