"""Installing what the manager ships into a folder of the unit's own (`--no-deps --target`), put first on the unit
program's PYTHONPATH: the image's environment is left as it is, and a requirement already satisfied there (same
name and version) is not installed again. The installer is uv when the unit has it (the worker image has it on its
PATH; an EC2 boot script puts it beside the unit's Python), else pip: uv installs a dozen wheels from a warm cache in
well under a second where pip (after `ensurepip` in an environment made by uv) takes several.

A requirement pip cannot install does not stop the unit: it is left out, the others are installed, and the
modules it provides are replaced by stubs whose import raises an ImportError naming the requirement and pip's
reason. The tasks that need it fail with that error (the client sees it at the first such task) instead of
waiting for workers that never come; the boot report says the same to the manager.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from scaler.worker_manager.unit.report import http

PIP_TIMEOUT_SECONDS = 900.0
#: A failing pip run is tried again without the requirement it names, this many times at most.
MAX_ATTEMPTS = 10
_NAME = r"([A-Za-z0-9][A-Za-z0-9._\-]*(?:==\S+)?)"
_CULPRITS = (
    # pip's words
    re.compile(r"No matching distribution found for (\S+)"),
    re.compile(r"(\S+\.whl) is not a supported wheel on this platform"),
    re.compile(r"Package '([^']+)' requires a different Python"),
    re.compile(r"Could not find a version that satisfies the requirement (\S+)"),
    re.compile(r"Failed to build (\S+)"),
    # uv's words
    re.compile(rf"Because {_NAME} was not found"),
    re.compile(rf"there is no version of {_NAME}"),
    re.compile(rf"Because only {_NAME} is available"),
    re.compile(rf"and {_NAME} depends on Python"),
    re.compile(r"Failed to (?:build|download|read) `?([^`\s:]+)"),
)


@dataclass(frozen=True)
class FailedInstall:
    requirement: str
    why: str


def already_satisfied(requirement: str) -> bool:
    """A `name==version` pin the unit's environment has already (the image's, or the laptop's own venv when a
    rehearsal runs units as local processes)."""
    name, separator, version = requirement.partition("==")
    if not separator or any(mark in name for mark in "@[;<>!~ "):
        return False
    try:
        return importlib.metadata.version(name.strip()) == version.strip()
    except importlib.metadata.PackageNotFoundError:
        return False


def download_wheels(wheels: list[dict[str, str]], folder: Path) -> tuple[list[Path], list[FailedInstall]]:
    folder.mkdir(parents=True, exist_ok=True)
    paths, failed = [], []
    for wheel in wheels:
        path = folder / wheel["filename"]
        try:
            path.write_bytes(http("GET", wheel["url"], timeout=300))
            paths.append(path)
        except OSError as error:
            failed.append(FailedInstall(wheel["filename"], f"could not download it from the manager's bucket: {error}"))
    return paths, failed


def install(requirements: list[str], wheel_files: list[Path], target: Path) -> list[FailedInstall]:
    """Install into `target`; what could not be installed, each with the installer's reason."""
    wanted = [item for item in requirements if not already_satisfied(item)] + [str(path) for path in wheel_files]
    failed: list[FailedInstall] = []
    if not wanted:
        return failed
    installer = _installer()
    for _attempt in range(MAX_ATTEMPTS):
        if not wanted:
            break
        done = subprocess.run(
            [*installer, "--no-deps", "--target", str(target), *wanted],
            capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if done.returncode == 0:
            return failed
        output = done.stderr + done.stdout
        culprit = _culprit(output, wanted)
        failed.append(FailedInstall(_shown(culprit), _reason(output)))
        wanted.remove(culprit)
    if wanted:
        failed.extend(FailedInstall(_shown(item), "not installed: the installer kept failing") for item in wanted)
    return failed


def write_stubs(failed: list[FailedInstall], modules: dict[str, list[str]], target: Path, unit: str) -> None:
    """Each module of a requirement that could not be installed raises an ImportError saying so."""
    for failure in failed:
        for module in modules.get(failure.requirement, []):
            message = f"{failure.requirement} could not be installed on {unit}: {failure.why}"
            (target / f"{module}.py").write_text(f"raise ImportError({message!r})\n")


def _installer() -> list[str]:
    """`uv pip install` for this interpreter when the unit has uv (beside the interpreter, or on the PATH), else
    pip's (made available with `ensurepip` when the environment has none)."""
    beside = Path(sys.executable).parent / "uv"
    uv = str(beside) if beside.is_file() else shutil.which("uv")
    if uv is not None:
        return [uv, "pip", "install", "--quiet", "--python", sys.executable]
    _ensure_pip()
    return [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
            "--no-warn-script-location", "--quiet"]  # fmt: skip


def _ensure_pip() -> None:
    """A virtual environment made by uv has no pip: Python's own ensurepip provides one."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, stdin=subprocess.DEVNULL)
    if probe.returncode != 0:
        subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], capture_output=True, check=False)


def _culprit(output: str, wanted: list[str]) -> str:
    for pattern in _CULPRITS:
        match = pattern.search(output)
        if match is None:
            continue
        named = match.group(1).lower().replace("_", "-")
        for item in wanted:
            shown = _shown(item).lower().replace("_", "-")
            if shown == named or shown.startswith(named) or named.endswith(Path(item).name.lower()):
                return item
    mentioned = [item for item in wanted if _name(item) and _name(item) in output.lower().replace("_", "-")]
    return mentioned[0] if mentioned else wanted[0]


def _name(item: str) -> str:
    """A requirement's or wheel file's distribution name, lower case with `-` (what installers print)."""
    shown = _shown(item)
    if shown.endswith(".whl"):
        return shown.split("-", 1)[0].lower().replace("_", "-")
    return re.split(r"[\s@\[=<>!~;]", shown, maxsplit=1)[0].lower().replace("_", "-")


def _shown(item: str) -> str:
    """A wheel file by its file name, a requirement (`name @ URL` included) as it is."""
    return Path(item).name if item.endswith(".whl") and " @ " not in item else item


def _reason(output: str) -> str:
    lines = [line.strip() for line in output.splitlines()
             if line.lower().startswith(("error", "cause:", "  cause:")) or "─>" in line or "─▶" in line]  # fmt: skip
    text = " ".join(lines) if lines else " ".join(output.strip().splitlines()[-3:])
    return f"{'uv' if 'cause:' in output or '─▶' in output else 'pip'}: {text}"[:600]
