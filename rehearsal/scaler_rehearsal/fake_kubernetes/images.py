"""The images the rehearsal's kubelet can "pull": a catalogue mapping a repository name to the folders that make the
container's PATH (an image is what its PATH offers here: the rest of a container, its own file system, a local
process cannot have).

An image is found by its repository's last path component, whatever its registry and tag (`scaler-worker:1.2`,
`ghcr.io/team/scaler-worker@sha256:...`); the catalogue knows, without being told:
- `scaler-worker` and `scaler`: the Python environment this rehearsal runs in (its `python` and the `scaler_*`
  commands: the package as the project's worker image has it), then the machine's ordinary commands;
- `python`: the machine's Python interpreter (`python`, `python3`) without any package, then the ordinary commands;
- `busybox`: the ordinary commands (`sh`, `sleep`, `cat`, ...) only.
The machine's ordinary commands are a mirror of /usr/bin and /bin without its interpreters and package managers.
`--image NAME=FOLDER[:FOLDER...]` adds or replaces one.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from scaler_rehearsal.images import mirror_commands, qualified, repository_of

#: The system folders mirrored into the images' ordinary commands.
_MIRRORED = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")
#: Never among an image's ordinary commands: interpreters and package tools (an image has what it has), the
#: machine's power and service commands.
_HIDDEN = re.compile(
    r"^(python|pip|pydoc|idle|2to3|pyenv|uv|uvx|virtualenv|easy_install|conda|apt|dpkg|shutdown|poweroff|halt|reboot|"
    r"init|telinit|systemctl|docker|dockerd|kubectl|scaler)"
)
#: The reference grammar of container image names (the distribution project's), parts by parts.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])"
_REFERENCE = re.compile(
    rf"^(?:{_HOST}(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?(?:@[A-Za-z][A-Za-z0-9]*"
    r"(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)


@dataclass(frozen=True, slots=True)
class Image:
    repository: str
    path: tuple[Path, ...]  #: the container's PATH, first folder first
    #: what the image's own ENV lines set (its PATH aside)
    environment: tuple[tuple[str, str], ...] = (("LANG", "C.UTF-8"),)


def reference_problem(reference: str) -> str | None:
    """The kubelet's words for a reference it cannot parse (the container waits as `InvalidImageName`), or None."""
    if _REFERENCE.match(reference) and len(reference.split("@", 1)[0].split(":", 1)[0]) <= 255:
        return None
    why = (
        "repository name must be lowercase"
        if reference.lower() != reference and _REFERENCE.match(reference.lower())
        else "invalid reference format"
    )
    return f'Failed to apply default image tag "{reference}": couldn\'t parse image reference "{reference}": {why}'


def pull_failure(reference: str) -> str:
    """What the kubelet says of an image no registry has (the `ErrImagePull` message)."""
    full = qualified(reference)
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{full}": failed to resolve reference '
        f'"{full}": {full}: not found'
    )


class ImageCatalogue:
    def __init__(self, state_directory: Path, images: Iterable[Image] = ()) -> None:
        self._commands = state_directory / "images" / "commands"
        self._python = state_directory / "images" / "python"
        self._images = {image.repository: image for image in self._defaults()}
        self._images.update({image.repository: image for image in images})

    def _defaults(self) -> list[Image]:
        this_environment = Path(sys.executable).parent
        return [
            Image("scaler-worker", (this_environment, self._commands)),
            Image("scaler", (this_environment, self._commands)),
            Image("python", (self._python, self._commands)),
            Image("busybox", (self._commands,)),
        ]

    def prepare(self) -> ImageCatalogue:
        """Make the ordinary commands' mirror and the bare Python's folder (once, at the start)."""
        for folder in (self._commands, self._python):
            folder.mkdir(parents=True, exist_ok=True)
        mirror_commands(self._commands, _MIRRORED, _HIDDEN)
        base = Path(getattr(sys, "_base_executable", sys.executable) or sys.executable)
        for name in ("python", "python3"):
            link = self._python / name
            if not link.is_symlink():
                link.symlink_to(base)
        return self

    def find(self, reference: str) -> Image | None:
        return self._images.get(repository_of(reference))

    def names(self) -> list[str]:
        return sorted(self._images)


def parse_image_option(text: str) -> Image:
    """`--image NAME=FOLDER[:FOLDER...]`: an image whose PATH is those folders (e.g. a virtual environment's bin)."""
    name, separator, folders = text.partition("=")
    name = name.strip()
    if not separator or not name or "/" in name or ":" in name or not folders.strip():
        raise ValueError(f"--image {text!r}: expected NAME=FOLDER[:FOLDER...], e.g. my-worker=/opt/venv/bin")
    path = tuple(Path(folder).expanduser().resolve() for folder in folders.split(os.pathsep) if folder.strip())
    missing = [str(folder) for folder in path if not folder.is_dir()]
    if missing:
        raise ValueError(f"--image {text!r}: no such folder: {', '.join(missing)}")
    return Image(name, path)
