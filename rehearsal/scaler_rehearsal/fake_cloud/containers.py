"""ECS tasks as real containers (`scaler_fake_cloud --container-engine docker`): the task's image, which must exist
in the local engine (docker/worker.Dockerfile builds the project's), runs with the task's environment.

The container shares the laptop's network (`--network host`): the fake cloud's endpoint and the scheduler on
127.0.0.1 are reachable as they are for the lighter units; `--isolate-network` does not apply to containers yet.
The fake cloud's installer cache is mounted into the container, so that its entrypoint's install is as fast as a
local unit's. Variables reach the container by name (`-e NAME`), never on a command line: a task's secrets
(the workers' keys) stay out of `ps`. Every container carries the label `scaler-fake-cloud=<pid>`; those of a
fake cloud that is no longer running are removed by the next one to start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psutil

from scaler_rehearsal.fake_cloud.launched import STOP_GRACE_SECONDS, LaunchedProcess

LABEL = "scaler-fake-cloud"
#: Where the package cache is mounted in the container.
CACHE_MOUNT = "/var/cache/scaler-fake-cloud/uv"
#: The unit's variables that stay outside: the container has its own PATH, HOME and the image's own ENV.
_LOCAL_ONLY = frozenset({"PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "SHELL", "LANG", "SCALER_WORKER_VENV",
                         "SCALER_IMAGE_PYTHON", "SCALER_IMAGE_REQUIREMENTS", "SCALER_IMAGE_VENV", "UV_CACHE_DIR",
                         "PIP_CACHE_DIR", "PIP_CONFIG_FILE", "SSL_CERT_FILE", "SSL_CERT_DIR"})  # fmt: skip


class ContainerProcess(LaunchedProcess):
    """A task's container, attached: the engine's client is the local process; stopping it stops the container."""

    def __init__(self, engine: str, name: str, image: str, variables: dict[str, str], log_path: Path,
                 cache_directory: Path) -> None:  # fmt: skip
        self.engine = shutil.which(engine) or engine
        self.name = name
        passed = sorted(key for key in variables if key not in _LOCAL_ONLY)
        argv = [
            self.engine, "run", "--rm", "--name", name, "--label", f"{LABEL}={os.getpid()}", "--network", "host",
            "-v", f"{cache_directory / 'uv'}:{CACHE_MOUNT}", "-e", f"UV_CACHE_DIR={CACHE_MOUNT}",
            *(part for key in passed for part in ("-e", key)), image,
        ]  # fmt: skip
        environment = {key: variables[key] for key in passed}
        environment["PATH"] = os.environ.get("PATH", os.defpath)
        for key in ("DOCKER_HOST", "DOCKER_CONFIG", "HOME"):
            if key in os.environ:
                environment[key] = os.environ[key]
        super().__init__(argv, environment, log_path)

    def step(self, now: float) -> None:
        if self._stop_requested_at is not None and now - self._stop_requested_at > STOP_GRACE_SECONDS:
            self._engine("kill", self.name)
            super().step(now)

    def kill(self) -> None:
        self._engine("rm", "-f", self.name)
        super().kill()

    def _engine(self, *arguments: str) -> None:
        subprocess.run([self.engine, *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
                       check=False)  # fmt: skip


def remove_leftover_containers(engine: str) -> None:
    """Containers of fake clouds that are no longer running."""
    try:
        template = f'{{{{.ID}}}} {{{{.Label "{LABEL}"}}}}'
        argv = [engine, "ps", "-a", "--filter", f"label={LABEL}", "--format", template]
        listed = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return
    for line in listed.stdout.splitlines():
        container, _space, pid = line.partition(" ")
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            subprocess.run([engine, "rm", "-f", container], capture_output=True, timeout=30, check=False)
