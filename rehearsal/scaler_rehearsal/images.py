"""Image references as a container runtime reads them, and the machine's ordinary commands as an image offers them.

A unit of a rehearsal is a local process, so an image is what its PATH offers: each rehearsal mirrors the machine's
commands into a folder of links, leaving out what an image would not have (its own list: interpreters, package
tools, the machine's power commands)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path


def repository_of(reference: str) -> str:
    """`registry.example.com:5000/team/scaler-worker:1.2@sha256:...` -> `scaler-worker`."""
    name = reference.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def qualified(reference: str) -> str:
    """A reference as the container runtime resolves it: Docker Hub's `docker.io/library/` for a short name, and
    `:latest` where it names no tag or digest."""
    text = reference
    if "@" not in text and ":" not in text.rsplit("/", 1)[-1]:
        text += ":latest"
    first = text.split("/", 1)[0]
    if "/" not in text:
        return f"docker.io/library/{text}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{text}"
    return text


def mirror_commands(mirror: Path, system_folders: Iterable[str], hidden: re.Pattern[str]) -> None:
    """Link into `mirror` every executable file of `system_folders` whose name `hidden` does not match; of a name in
    several folders, the first folder's. A folder that cannot be read, or a file that cannot be linked, is passed
    over; what `mirror` already has stays."""
    for name, path in mirrored_commands(system_folders, hidden).items():
        target = mirror / name
        if target.exists() or target.is_symlink():
            continue
        try:
            target.symlink_to(path)
        except OSError:
            continue


def shared_mirror(cache: Path, system_folders: Iterable[str], hidden: re.Pattern[str]) -> Path:
    """The folder of links `mirror_commands` would make, made once per machine under `cache` and shared by every
    rehearsal after it (about 1,400 links: seconds on a loaded disk at each start otherwise). It is named by a digest
    of what it links, so that a command added to or removed from the machine makes another; a folder being made is
    renamed into place only when complete."""
    commands = mirrored_commands(system_folders, hidden)
    listing = "\n".join(f"{name}\t{path}" for name, path in sorted(commands.items()))
    folder = cache / hashlib.sha256(listing.encode()).hexdigest()[:16]
    if folder.is_dir():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".making-", dir=cache))
    mirror_commands(building, system_folders, hidden)
    try:
        building.rename(folder)
    except OSError:  # another rehearsal made it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return folder


def mirrored_commands(system_folders: Iterable[str], hidden: re.Pattern[str]) -> dict[str, str]:
    """Name -> path of every executable file of `system_folders` whose name `hidden` does not match (the first
    folder's of a name in several); a folder that cannot be read is passed over."""
    found: dict[str, str] = {}
    for system_folder in system_folders:
        try:
            entries = sorted(os.scandir(system_folder), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in found or hidden.match(entry.name):
                continue
            try:
                if entry.is_file() and os.access(entry.path, os.X_OK):
                    found[entry.name] = entry.path
            except OSError:
                continue
    return found
