"""A unit's start from nothing: its own folder, HOME and working directory, and an environment and PATH that hold
nothing of the laptop's (no virtual environment, PYTHONPATH, interpreter or working directory).

What a unit finds on its PATH is what its image or AMI has:
- an ECS task or a Batch job (the project's worker image): `python3.X` for the image's Pythons this machine has,
  `uv`, and the image's entrypoint, which runs the unit in the image's environment (`image_environments.py`: made
  once per image and machine, shared by its units, never written) or makes the unit's own
  (`image/worker-entrypoint.sh`);
- an EC2 instance (Amazon Linux 2023): `python3` (3.9, a fresh environment of its own, without pip), and shims of
  `dnf`/`yum` (the Pythons AL2023 offers) and `shutdown`/`poweroff`/`halt`/`reboot` (`shims/`); with `ami_has_uv`,
  also `uv`, as an AMI baked for scaler has it (stock AL2023 has none: an instance's boot installs it with pip);
- both: the machine's ordinary commands (a mirror of /usr/bin, /bin, /usr/sbin, /sbin without its interpreters and
  its power commands: a unit never powers the laptop off).

The mirror of the machine's commands is made once per machine (in the fake cloud's cache directory, `system-bin/`)
and linked from each cloud's state directory: about 1,400 links, seconds of every start on a loaded disk otherwise.

Packages come from the package index through the fake cloud's mirror (`package_index.py`) into an installer cache
shared by the cloud's units (`installer_cache`), so that a unit boots in well under a second once the cache is warm.
That cache lives in the cloud's state directory and goes with it: the installers key what they cache by URL, and
a cloud's URLs carry its port, so no later cloud could use it (kept in ~/.cache, it grew by every cloud's unpacked
wheels, about 150 MB a cloud, until the disk was full). What is worth keeping between clouds, the files the
mirror downloaded from PyPI, the mirror keeps itself (`index-files/` in the fake cloud's cache directory).
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from scaler_rehearsal.fake_cloud.image_environments import ImageEnvironments
from scaler_rehearsal.fake_cloud.images import WORKER_IMAGE_PYTHONS, Image
from scaler_rehearsal.fake_cloud.package_index import INDEX_ROUTE
from scaler_rehearsal.images import mirror_commands, shared_mirror

#: The system folders a unit's commands come from (mirrored, less what `_HIDDEN` names).
_MIRRORED = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
#: Never in a unit's PATH: interpreters and Python tools (a unit has what its image or AMI has), the package
#: managers the shims stand for, and the machine's power commands.
_HIDDEN = re.compile(
    r"^(python|pip|pydoc|idle|2to3|pyenv|uv|uvx|virtualenv|easy_install|dnf|yum|shutdown|poweroff|halt|reboot|"
    r"init|telinit|systemctl|docker|dockerd)"
)
#: Amazon Linux 2023: its system Python (`python3`), and the other Pythons its repositories offer (`dnf install`).
AL2023_SYSTEM_PYTHON = "3.9"
AL2023_PYTHONS = ("3.9", "3.11", "3.12", "3.13", "3.14")
#: The variables of the laptop a unit keeps: the machine's trust store (a TLS-intercepting proxy's CA, say).
_KEPT = ("SSL_CERT_FILE", "SSL_CERT_DIR")
ENTRYPOINT = "scaler-worker-entrypoint"
#: The name a gone unit's folder is given until it is removed (beside the units' folders).
REMOVING_PREFIX = ".removing-"
SHUTDOWN_MARKER = ".fake-cloud/shutdown"


@dataclass(frozen=True)
class Launch:
    """How to start a unit: its command, environment and working directory."""

    argv: list[str]
    environment: dict[str, str]
    cwd: Path
    folder: Path


@dataclass
class Sandbox:
    """The fake cloud's units' common ground: the image's and AMI's tools (made once, under `state_directory`)."""

    state_directory: Path
    installer_cache: Path  #: uv's and pip's caches (`uv/`, `pip/`), the cloud's own
    interpreters: dict[str, Path]
    uv: Path
    extra_environment: dict[str, str] = field(default_factory=dict)
    #: the instances' AMI has `uv` on its PATH (an AMI baked for scaler), not only what stock AL2023 has
    ami_has_uv: bool = False
    #: where the mirror of the machine's commands is kept for every cloud after this one (None: made for this one)
    commands_cache: Path | None = None
    #: where the images' environments are kept for every cloud after this one (None: made for this one)
    environments_cache: Path | None = None
    _removal: BackgroundRemoval = field(default_factory=lambda: BackgroundRemoval(), repr=False)
    _image_environments: ImageEnvironments | None = field(default=None, repr=False)

    def prepare(self) -> Sandbox:
        for folder in ("image-bin", "image-environments", "ami-repo", "ami-tools", "units"):
            shutil.rmtree(self.state_directory / folder, ignore_errors=True)
            (self.state_directory / folder).mkdir(parents=True)
        self._mirror_system_commands(self.state_directory / "system-bin")
        image_bin = self.state_directory / "image-bin"
        for minor in WORKER_IMAGE_PYTHONS:
            if minor in self.interpreters:
                (image_bin / f"python{minor}").symlink_to(self.interpreters[minor])
        (image_bin / "uv").symlink_to(self.uv)
        _copy_resource("image/worker-entrypoint.sh", image_bin / ENTRYPOINT)
        for minor in AL2023_PYTHONS:
            if minor in self.interpreters:
                (self.state_directory / "ami-repo" / f"python{minor}").symlink_to(self.interpreters[minor])
        tools = self.state_directory / "ami-tools"
        dnf = resources.files("scaler_rehearsal.fake_cloud").joinpath("shims/dnf").read_text()
        values = {"@REPO@": str(self.state_directory / "ami-repo"), "@UV@": str(self.uv),
                  "@SYSTEM_PYTHON@": AL2023_SYSTEM_PYTHON}  # fmt: skip
        for placeholder, value in values.items():
            dnf = dnf.replace(placeholder, value)
        (tools / "dnf").write_text(dnf)
        _copy_resource("shims/shutdown", tools / "shutdown")
        for tool in ("dnf", "shutdown"):
            (tools / tool).chmod(0o755)
        (self.installer_cache / "uv").mkdir(parents=True, exist_ok=True)
        self._image_environments = ImageEnvironments(self.state_directory / "image-environments", self.interpreters,
                                                     self.uv, self.environments_cache)  # fmt: skip
        return self

    def unit_folder(self, name: str) -> Path:
        return self.state_directory / "units" / name

    def container(self, name: str, image: Image, command: list[str], variables: dict[str, str], endpoint: str,
                  region: str, image_environment: bool = True) -> Launch:  # fmt: skip
        """An ECS task's or Batch job's container of the worker image: its entrypoint, then `command` (none for an
        ECS task, which runs its COMMAND variable). With `image_environment`, the image's environment is made
        here if it is not yet (a container engine's image has its own)."""
        folder = self._fresh(name)
        environment = self._environment(folder, [self.state_directory / "image-bin"], endpoint, region)
        environment.update(image.environment(), SCALER_WORKER_VENV=str(folder / "venv"))
        ready = self._image_environment(image, endpoint, region) if image_environment else None
        if ready is not None:
            environment["SCALER_IMAGE_VENV"] = str(ready)
        environment.update(variables)
        argv = ["/bin/sh", str(self.state_directory / "image-bin" / ENTRYPOINT), *command]
        return Launch(argv, environment, folder / "work", folder)

    def instance(self, name: str, user_data: str, endpoint: str, region: str) -> Launch:
        """An EC2 instance of Amazon Linux 2023: its user data, run as a root shell script."""
        folder = self._fresh(name)
        bin_folder = folder / "bin"
        bin_folder.mkdir()
        for tool, names in (("dnf", ("dnf", "yum")), ("shutdown", ("shutdown", "poweroff", "halt", "reboot"))):
            for alias in names:
                (bin_folder / alias).symlink_to(self.state_directory / "ami-tools" / tool)
        if self.ami_has_uv:
            (bin_folder / "uv").symlink_to(self.uv)
        environment = self._environment(folder, [bin_folder], endpoint, region)
        # the AMI's python3 (3.9): an environment of this instance's own, which its user data may pip-install into
        subprocess.run([str(bin_folder / "dnf"), "install", "-y", "python3"], env=environment, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)  # fmt: skip
        script = folder / "user-data.sh"
        script.touch(mode=0o600)  # user data may hold the workers' keys
        script.write_text(user_data)
        return Launch(["/bin/sh", str(script)], environment, folder / "work", folder)

    def shutdown_requested(self, name: str) -> str | None:
        """`poweroff` or `reboot` when the instance's own shutdown ran (shims/shutdown), else None."""
        marker = self.unit_folder(name) / SHUTDOWN_MARKER
        try:
            return marker.read_text().strip() or "poweroff"
        except OSError:
            return None

    def forget(self, name: str) -> None:
        """The unit is gone: its folder (virtual environment, home) with it, removed in the background (thousands of
        files: seconds on a loaded disk, which neither the runners' step nor a stop waits for). The folder is first
        renamed, so that its name is free at once; whatever is left goes with the state directory."""
        folder = self.unit_folder(name)
        trash = folder.with_name(f"{REMOVING_PREFIX}{name}")
        try:
            folder.rename(trash)
        except OSError:  # no such folder (a unit forgotten twice, a reset), or a leftover of the same name
            shutil.rmtree(folder, ignore_errors=True)
            return
        self._removal.remove(trash)

    def image_environment(self, repository: str) -> Path | None:
        """The environment of the image of `repository`, once a container of it has started (None: none made)."""
        return self._image_environments.made(repository) if self._image_environments is not None else None

    def _image_environment(self, image: Image, endpoint: str, region: str) -> Path | None:
        assert self._image_environments is not None, "prepare() first"
        builder = self.state_directory / "image-environments" / ".builder"
        for part in ("home", "tmp"):
            (builder / part).mkdir(parents=True, exist_ok=True)
        environment = self._environment(builder, [self.state_directory / "image-bin"], endpoint, region)
        return self._image_environments.of(image, environment)

    def _fresh(self, name: str) -> Path:
        folder = self.unit_folder(name)
        shutil.rmtree(folder, ignore_errors=True)
        for part in ("home", "work", "tmp"):
            (folder / part).mkdir(parents=True)
        return folder

    def _environment(self, folder: Path, first: list[Path], endpoint: str, region: str) -> dict[str, str]:
        index = f"{endpoint}{INDEX_ROUTE}/simple"
        host = endpoint.split("://", 1)[-1].split("/", 1)[0]
        environment = {name: os.environ[name] for name in _KEPT if name in os.environ}
        environment.update(
            PATH=os.pathsep.join([*map(str, first), str(self.state_directory / "system-bin")]),
            HOME=str(folder / "home"), USER="root", LOGNAME="root", SHELL="/bin/sh", LANG="C.UTF-8",
            TMPDIR=str(folder / "tmp"),
            AWS_ENDPOINT_URL=endpoint, AWS_DEFAULT_REGION=region, AWS_REGION=region,
            AWS_ACCESS_KEY_ID=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
            AWS_SECRET_ACCESS_KEY=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
            # the package index, through the fake cloud (what a VPC's internet access stands for), and one cache
            UV_DEFAULT_INDEX=index, UV_CACHE_DIR=str(self.installer_cache / "uv"), UV_PYTHON_DOWNLOADS="never",
            PIP_INDEX_URL=index, PIP_TRUSTED_HOST=host, PIP_CACHE_DIR=str(self.installer_cache / "pip"),
            PIP_CONFIG_FILE=os.devnull,
            # pip without byte-compiling what it installs, nor asking for a newer pip: seconds less per boot (pip
            # reads PIP_NO_COMPILE=1 as "compile", its negated options' inversion: the option's own name says it)
            PIP_COMPILE="0", PIP_DISABLE_PIP_VERSION_CHECK="1",
        )  # fmt: skip
        environment.update(self.extra_environment)
        return environment

    def _mirror_system_commands(self, mirror: Path) -> None:
        """`mirror`: the machine's commands a unit has (a link to the machine's shared mirror when there is a cache)."""
        if mirror.is_symlink():
            mirror.unlink()
        shutil.rmtree(mirror, ignore_errors=True)
        if self.commands_cache is not None:
            mirror.symlink_to(shared_mirror(self.commands_cache, _MIRRORED, _HIDDEN), target_is_directory=True)
            return
        mirror.mkdir(parents=True)
        mirror_commands(mirror, _MIRRORED, _HIDDEN)


class BackgroundRemoval:
    """Removes folders one after another on a thread of its own (started at the first folder), so that whoever hands
    one over does not wait; a folder not removed when the process ends is left to whoever removes its parent."""

    def __init__(self) -> None:
        self._folders: queue.SimpleQueue[Path] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def remove(self, folder: Path) -> None:
        self._folders.put(folder)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fake-cloud-folder-removal", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            shutil.rmtree(self._folders.get(), ignore_errors=True)


def _copy_resource(name: str, target: Path) -> None:
    target.write_bytes(resources.files("scaler_rehearsal.fake_cloud").joinpath(name).read_bytes())
    target.chmod(0o755)
