"""The commands of the docs that run until they are stopped (a stack, a server, the fake cloud, a terminal screen),
and how the tier knows each is ready: the line it prints once a reader may go on to the next step.

A reader types such a command in a terminal and goes on in another one (or in a notebook) once it printed that line;
the tier starts it in the background, waits for the same line, and stops it with Ctrl-C (SIGINT to its process
group) where the page says so or at the page's end.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Commands whose flags make them print something and exit instead of running.
_ONE_SHOT_FLAGS = frozenset({"-h", "--help", "--version", "--example", "--completion", "--down", "--slurm-dry-run"})

#: program -> the text its output shows once it is ready
_READY_LINES: dict[str, str] = {
    "scaler_fake_cloud": "AWS_ENDPOINT_URL=",
    "scaler_fake_kubernetes": "KUBECONFIG=",
    "scaler_scheduler": "scheduler listening on",
    "scaler_object_storage_server": "object storage server listening on",
    "scaler_cluster": "cluster: starting",
    "scaler_worker_manager": "registered with the scheduler",
    "scaler_worker": "connecting to",
    "scaler_gui": "dashboard at http",
    "scaler_ui": "dashboard at http",
    "scaler_top": "Shortcuts:",
    "scaler_link": "scaler_link: round trip",
}
#: What `scaler --docs [NAME] --serve PORT` prints once it serves the documentation site.
_SITE_SERVED = "scaler: the documentation at http"
#: programs that draw on a terminal: they get a pseudo-terminal, as in a reader's terminal
_TERMINAL_PROGRAMS = frozenset({"scaler_top"})


@dataclass(frozen=True)
class LongRunning:
    program: str
    ready: Callable[[str], bool]  #: given the output so far
    waits_for: str  #: what ready() looks for, said in failure messages
    terminal: bool


def long_running(command: str, cwd: Path) -> LongRunning | None:
    """What the tier must know of a command that runs until stopped, or None for one that ends by itself."""
    subshell = re.fullmatch(r"\(\s*cd\s+(\S+)\s*&&\s*(.+?)\s*\)", command.strip())
    if subshell is not None:  # (cd FOLDER && COMMAND)
        return long_running(subshell.group(2), cwd / subshell.group(1))
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]  # VARIABLE=value before the program
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "scaler"]:
        words = ["scaler", *words[3:]]
    if not words or _ONE_SHOT_FLAGS & set(words):
        return None
    program = Path(words[0]).name
    if program == "scaler" and "--docs" in words:  # a page printed, or the site served with --serve
        served = LongRunning(program, lambda output: _SITE_SERVED in output, repr(_SITE_SERVED), False)
        return served if "--serve" in words else None
    if program == "scaler":
        files = [word for word in words[1:] if not word.startswith("-")]
        return None if not files else _stack(cwd / files[0])
    line = _READY_LINES.get(program)
    if line is None:
        return None
    return LongRunning(program, lambda output: line in output, repr(line), program in _TERMINAL_PROGRAMS)


def _stack(path: Path) -> LongRunning:
    """`scaler FILE` is ready once it announced every worker manager of the file (the last thing it starts), or,
    with none, the last server it starts."""
    try:
        file = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        # the launcher refuses the file itself: the step fails when it exits
        return LongRunning("scaler", lambda output: False, f"{path.name} to be a TOML file", False)
    managers = len(file.get("worker_manager", []))
    if managers:
        return LongRunning(
            "scaler",
            lambda output: output.count("scaler: worker manager ") >= managers,
            f"{managers} 'scaler: worker manager ...' line(s)",
            False,
        )
    if "gui" in file or "webui" in file:
        line = "scaler: dashboard at "
    elif "scheduler" in file:
        line = "scaler: scheduler at "
    else:
        line = "scaler: object storage server at "
    return LongRunning("scaler", lambda output: line in output, repr(line), False)
