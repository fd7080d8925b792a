"""Does the package index have a file of each requirement that the units can install? Asked with pip itself
(`pip install --dry-run --no-deps --only-binary :all: --target TMP` for the units' Python and platform: pip before
23.3 takes a platform only with `--target`), from the index this machine's pip is configured with, which is the one
the units are pointed at as well. Only pip's "no file of it" blames a requirement; a check that cannot run (no pip,
an unreachable index, another refusal) is said in the log and blames nothing.

The question is put to the index only: pip's find-links (`--find-links`, `PIP_FIND_LINKS`, `find-links` in pip's
configuration) are left out, since a folder or page of wheels on this machine is nowhere a unit looks. A wheel
installed from such a folder (no `direct_url.json` either) looks published; `on_index` says whether it is.

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
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scaler.worker_manager.ship.unit_target import UnitTarget

logger = logging.getLogger(__name__)

#: Requirements per pip run; a failing run is asked again without the requirement pip named.
BATCH = 200
PIP_TIMEOUT_SECONDS = 300.0
#: Before the keys of what was found: answers of the index alone (earlier checks also looked in pip's find-links).
CACHE_KEY_PREFIX = "index-only "
_NOT_FOUND = re.compile(r"No matching distribution found for (\S+)")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+)( \(from versions: [^)]*\))?")
_INVALID = re.compile(r"Invalid requirement: '([^']+)'")
#: pip's words when the index does not answer (it then also says "No matching distribution", which is not the
#: requirement's fault)
_UNREACHABLE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Connection refused|Name or service not known|"
    r"Temporary failure in name resolution|Max retries exceeded|ConnectTimeoutError|SSLError|ProxyError"
)


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scaler" / "index-checks.json"


def unavailable(
    requirements: Sequence[str], target: UnitTarget, pip: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """(requirement, why) for each requirement the index has no installable file of for the units. A check that
    cannot run (no pip, the index unreachable, a pip that refuses the question) is said once in the log and blames
    nothing: the units then say in their boot report what they could not install. `pip`: the command that runs
    pip (this interpreter's by default)."""
    return _check(requirements, target, pip).missing


def on_index(requirement: str, target: UnitTarget, pip: Sequence[str] | None = None) -> bool:
    """Whether the package index verifiably has an installable file of `requirement` for the units (pip found it
    there, now or in an earlier check). False when it has none, and when the check could not run: a caller that
    can ship the thing itself then does."""
    return requirement in _check([requirement], target, pip).found


@dataclass
class _Answers:
    found: set[str] = field(default_factory=set)
    missing: list[tuple[str, str]] = field(default_factory=list)


def _check(requirements: Sequence[str], target: UnitTarget, pip: Sequence[str] | None) -> _Answers:
    command = list(pip) if pip is not None else [sys.executable, "-m", "pip"]
    path = cache_file()
    known = _load(path)
    key = f"{CACHE_KEY_PREFIX}cp{target.python}-linux_x86_64"
    wanted = list(dict.fromkeys(requirements))
    answers = _Answers(found={item for item in wanted if f"{key} {item}" in known})
    remaining = [item for item in wanted if item not in answers.found]
    while remaining:
        batch, remaining = remaining[:BATCH], remaining[BATCH:]
        answer = _ask(command, batch, target)
        if isinstance(answer, Unchecked):
            logger.warning(
                "the package index check could not run, so the units' requirements are not checked before they "
                "boot (a unit that cannot install one names it in its boot report): %s", answer.reason,
            )  # fmt: skip
            break
        if answer is None:
            known.update(f"{key} {item}" for item in batch)
            answers.found.update(batch)
            continue
        name, why = answer
        culprit = _matching(batch, name)
        answers.missing.append((culprit, why))
        batch.remove(culprit)
        remaining = batch + remaining  # the others are asked again without it
    _save(path, known)
    return answers


@dataclass(frozen=True)
class Unchecked:
    """pip could not answer the question (not a fault of any requirement): why, in its words."""

    reason: str


def _ask(pip: list[str], requirements: list[str], target: UnitTarget) -> tuple[str, str] | Unchecked | None:
    """None when pip finds every requirement; the one it names and its words; or Unchecked."""
    with tempfile.TemporaryDirectory(prefix="scaler-index-check-") as target_folder:
        # --target: pip before 23.3 refuses --platform and --python-version without it (a dry run writes nothing)
        command = [
            *pip, "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet", "--disable-pip-version-check",
            "--only-binary", ":all:", "--python-version", target.python, "--implementation", "cp",
            "--platform", "manylinux_2_34_x86_64", "--platform", "manylinux2014_x86_64", "--target", target_folder,
            *requirements,
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=PIP_TIMEOUT_SECONDS,
                stdin=subprocess.DEVNULL,
                env=index_only_environment(),
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return Unchecked(f"running pip failed: {error}")
    return answer_of(done.returncode, done.stderr + done.stdout, requirements, target)


def index_only_environment() -> dict[str, str]:
    """This process's environment, with pip's find-links emptied: the variable overrides pip's configuration files,
    and the units have neither (they install from the package index alone)."""
    return {**os.environ, "PIP_FIND_LINKS": ""}


def answer_of(
    returncode: int, output: str, requirements: list[str], target: UnitTarget
) -> tuple[str, str] | Unchecked | None:
    """What pip's exit code and output say: every requirement found (None), one it names as not found, or a
    question pip could not answer (Unchecked: no pip, an unreachable index, an option this pip refuses ...)."""
    if returncode == 0:
        return None
    if "No module named pip" in output:
        return Unchecked("this Python has no pip")
    unreachable = next((line for line in output.splitlines() if _UNREACHABLE.search(line)), None)
    if unreachable is not None:
        return Unchecked(f"the package index could not be reached (pip: {unreachable.strip()[-300:]})")
    found = _NOT_FOUND.search(output)
    versions = _NO_VERSION.search(output)
    if found is not None:
        offered = versions.group(2).strip() if versions is not None and versions.group(2) else ""
        why = (f"the package index has no file of it for Python {target.python} on Linux x86_64 "
               f"{offered}").strip()  # fmt: skip
        return found.group(1), why
    invalid = _INVALID.search(output)
    if invalid is not None:
        return invalid.group(1), f"not a requirement pip can read: {_last_error(output)}"
    return Unchecked(f"pip exited with code {returncode}: {_last_error(output)}")


def _last_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("ERROR")] or output.splitlines()[-1:]
    return " ".join(lines)[-400:]


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
