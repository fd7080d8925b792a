"""Does the package index have a file of each requirement that the units can install? Asked with pip itself
(`pip install --dry-run --no-deps --only-binary :all:` for the units' Python and platform), from the index this
machine's pip is configured with, which is the one the units are pointed at as well.

Requirements found are remembered (`~/.cache/scaler/index-checks.json`), so a manager started again does not ask
again; what was not found is asked every time (it may have been published since).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from scaler.worker_manager.ship.unit_target import UnitTarget

logger = logging.getLogger(__name__)

#: Requirements per pip run; a failing run is asked again without the requirement pip named.
BATCH = 200
PIP_TIMEOUT_SECONDS = 300.0
_NOT_FOUND = re.compile(r"No matching distribution found for (\S+)")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+)( \(from versions: [^)]*\))?")


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scaler" / "index-checks.json"


def unavailable(requirements: Sequence[str], target: UnitTarget) -> list[tuple[str, str]]:
    """(requirement, why) for each requirement the index has no installable file of for the units."""
    path = cache_file()
    known = _load(path)
    key = f"cp{target.python}-linux_x86_64"
    remaining = [item for item in dict.fromkeys(requirements) if f"{key} {item}" not in known]
    missing: list[tuple[str, str]] = []
    while remaining:
        batch, remaining = remaining[:BATCH], remaining[BATCH:]
        failed = _ask(batch, target)
        if failed is None:
            known.update(f"{key} {item}" for item in batch)
            continue
        name, why = failed
        culprit = _matching(batch, name)
        missing.append((culprit, why))
        batch.remove(culprit)
        remaining = batch + remaining  # the others are asked again without it
    _save(path, known)
    return missing


def _ask(requirements: list[str], target: UnitTarget) -> tuple[str, str] | None:
    """None when pip finds every requirement; else the one it names and its words."""
    command = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
        "--disable-pip-version-check", "--only-binary", ":all:", "--python-version", target.python,
        "--implementation", "cp", "--platform", "manylinux_2_34_x86_64", "--platform", "manylinux2014_x86_64",
        *requirements,
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        logger.warning("could not ask the package index with pip (%s): the requirements are not checked", error)
        return None
    if done.returncode == 0:
        return None
    output = done.stderr + done.stdout
    if "No module named pip" in output:
        logger.warning("this Python has no pip: the requirements cannot be checked against the package index")
        return None
    found = _NOT_FOUND.search(output)
    versions = _NO_VERSION.search(output)
    if found is not None:
        offered = versions.group(2).strip() if versions is not None and versions.group(2) else ""
        why = (f"the package index has no file of it for Python {target.python} on Linux x86_64 "
               f"{offered}").strip()  # fmt: skip
        return found.group(1), why
    last = [line for line in output.splitlines() if line.startswith("ERROR")] or output.splitlines()[-1:]
    return requirements[0], f"pip could not use it: {' '.join(last)[-400:]}"


def _matching(batch: list[str], name: str) -> str:
    """The requirement of the batch pip named (pip prints it normalised)."""
    lowered = name.lower().replace("_", "-")
    for item in batch:
        if item.lower().replace("_", "-").startswith(lowered.split("==")[0]) and (
            "==" not in lowered or item.lower().replace("_", "-") == lowered
        ):
            return item
    return batch[0]


def _load(path: Path) -> set[str]:
    try:
        return set(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return set()


def _save(path: Path, known: set[str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(sorted(known)))
        partial.replace(path)
    except OSError as error:
        logger.debug("could not remember the index checks in %s: %s", path, error)
