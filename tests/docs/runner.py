"""Runs the steps of one page as a reader would, in one working folder: shell commands through bash (what they
export, and the folder they `cd` to, carry over to the next steps), scripts with the reader's Python, files saved
where the page names them, and long-running commands in the background until Ctrl-C.

Everything the page starts runs in a process group of its own, with a marker in its environment
(`DOC_TEST_PAGE`); at the page's end what is still running gets Ctrl-C, must stop within STOP_SECONDS, and
nothing with the marker may be left.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.docs.programs import LongRunning, long_running
from tests.docs.steps import Kind, Step

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: How long a command that runs until Ctrl-C may take to stop once it got it (a cloud stack stops its units first).
STOP_SECONDS = 90.0
#: Exit statuses of a command that stopped on Ctrl-C as it should.
STOPPED_BY_CTRL_C = frozenset({0, 130, -signal.SIGINT})
#: The environment variable that marks every process a page starts (to find what it left behind).
MARKER = "DOC_TEST_PAGE"
#: What a failure message keeps of a command's output.
OUTPUT_TAIL = 4000
#: A command that installs into the reader's environment.
PIP_INSTALL = re.compile(r"\bpip install\b")
_SHOWN = re.compile(r"print\(.*\)\s+#\s*(.+)$")
#: bash's own variables, which `env` shows after a command but a reader's shell does not pass on
_SHELL_OWN = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})
_ENVIRONMENT_DUMP = '\n__status=$?\nenv -0 > "$1"\npwd > "$2"\nexit $__status\n'


class StepFailed(Exception):
    """A step did not do what the page says."""


@dataclass
class StepResult:
    step: Step
    outcome: str  #: "ran", "skipped", "failed" or "not reached"
    seconds: float = 0.0
    detail: str = ""


@dataclass
class Background:
    """A command of the page that runs until it is stopped."""

    command: str
    step: Step
    process: subprocess.Popen[bytes]
    log: Path
    program: LongRunning
    reader: threading.Thread | None = None  # copies a pseudo-terminal's output to the log
    tree: list[psutil.Process] = field(default_factory=list)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def remember_tree(self) -> None:
        with contextlib.suppress(psutil.Error):
            known = {process.pid for process in self.tree}
            self.tree += [p for p in psutil.Process(self.process.pid).children(recursive=True) if p.pid not in known]


@dataclass
class PageRun:
    page: str
    folder: Path
    environment: dict[str, str]
    python: Path  #: the reader's `python` (the virtual environment's)
    #: what every command of the page runs behind: entering the page's own network (tests/docs/own_network.py)
    prefix: tuple[str, ...] = ()
    #: what the page's `pip install` commands run with, beside its environment, and only they (where they find what
    #: they install: tests/docs/readers.py's `installs_from`); not passed on to the next steps
    install_environment: dict[str, str] = field(default_factory=dict)
    cwd: Path = field(init=False)
    background: list[Background] = field(default_factory=list)
    _logs: int = 0

    def __post_init__(self) -> None:
        self.cwd = self.folder
        self.environment = {**self.environment, MARKER: f"{self.page}@{self.folder}"}

    # ------------------------------------------------------------ steps

    def run(self, step: Step) -> StepResult:
        if step.skip_reason is not None:
            return StepResult(step, "skipped", detail=step.skip_reason)
        started = time.monotonic()
        try:
            self._run(step)
        except StepFailed as failure:
            return StepResult(step, "failed", time.monotonic() - started, str(failure))
        return StepResult(step, "ran", time.monotonic() - started)

    def _run(self, step: Step) -> None:
        for running in self.background:
            running.remember_tree()
        if step.kind is Kind.SHELL:
            for command in step.commands:
                self._shell(command, step)
        elif step.kind is Kind.PYTHON:
            self._python(step)
        elif step.kind is Kind.FILE:
            self._save(step)
        elif step.kind is Kind.TOML:
            try:
                tomllib.loads(step.text)
            except tomllib.TOMLDecodeError as error:
                raise StepFailed(f"not TOML: {error}") from None
            if step.file_name is not None:
                self._save(step)
        elif step.kind is Kind.CTRL_C:
            self._ctrl_c(self._background_of(step.text))

    def _save(self, step: Step) -> None:
        assert step.file_name is not None
        path = self.cwd / step.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(step.text)

    def _shell(self, command: str, step: Step) -> None:
        in_background = command.endswith("&") and not command.endswith("&&")
        if in_background:
            command = command[:-1].rstrip()
        program = long_running(command, self.cwd)
        if program is not None:
            self._start(command, step, program)
        elif in_background:
            raise StepFailed(f"`{command} &`: the tier does not know when it is ready (tests/docs/programs.py)")
        elif PIP_INSTALL.search(command):
            with self._environment_locked():
                self._foreground(command, step, self.install_environment)
        else:
            self._foreground(command, step)

    @contextlib.contextmanager
    def _environment_locked(self) -> Iterator[None]:
        """The reader's environment is shared by the pages of every test process: one `pip install` into it at a
        time (the others wait, then find what it installed)."""
        with (self.python.parent.parent / ".doc-test-pip.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _foreground(self, command: str, step: Step, only_here: dict[str, str] | None = None) -> None:
        """Runs `command` in the page's shell; `only_here`: variables it runs with that the next steps do not get."""
        dump = self.folder / ".doc-test-environment"
        where = self.folder / ".doc-test-cwd"
        argv = ["bash", "-c", f"set -a\n{command}{_ENVIRONMENT_DUMP}", "bash", str(dump), str(where)]
        before = self.environment
        code, output = self._call(argv, step.timeout_seconds, f"`{command}`", {**before, **(only_here or {})})
        if code != 0:
            raise StepFailed(f"`{command}` exited with {code}:\n{output[-OUTPUT_TAIL:]}")
        pairs = (item.partition("=") for item in dump.read_text().split("\0") if item)
        self.environment = {name: value for name, _, value in pairs if name not in _SHELL_OWN}
        for name in only_here or {}:
            if name in before:
                self.environment[name] = before[name]
            else:
                self.environment.pop(name, None)
        self.cwd = Path(where.read_text().strip())

    def _python(self, step: Step) -> None:
        script = self.folder / f".doc-test-{step.line}.py"
        script.write_text(step.text)
        code, output = self._call([str(self.python), str(script)], step.timeout_seconds, "the script")
        if code != 0:
            raise StepFailed(f"the script exited with {code}:\n{output[-OUTPUT_TAIL:]}")
        lines = [line.strip() for line in output.splitlines()]
        for expected in _shown_lines(step.text):
            if expected not in lines:
                raise StepFailed(f"the page says it prints {expected!r}; it printed:\n{output[-OUTPUT_TAIL:]}")

    def _call(
        self, argv: list[str], timeout_seconds: float, what: str, environment: dict[str, str] | None = None
    ) -> tuple[int, str]:
        process = subprocess.Popen(
            [*self.prefix, *argv], cwd=self.cwd, env=self.environment if environment is None else environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            output, _ = process.communicate(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            output, _ = process.communicate()
            text = output.decode(errors="replace")
            raise StepFailed(f"{what} did not end within {timeout_seconds:g} s:\n{text[-OUTPUT_TAIL:]}") from None
        text = output.decode(errors="replace")
        left = _group(process.pid)
        if left:
            _wait_gone(left, 15)
            left = [member for member in left if _alive(member)]
        if left:
            description = _describe(left)
            _kill_group(process.pid)
            raise StepFailed(f"{what} ended and left {description} running:\n{text[-OUTPUT_TAIL:]}")
        return process.returncode, text

    # ------------------------------------------------------------ long-running commands

    def _start(self, command: str, step: Step, program: LongRunning) -> None:
        self._logs += 1
        log = self.folder / f".doc-test-background-{self._logs}.log"
        environment = {**self.environment, "PYTHONUNBUFFERED": "1"}  # as a terminal shows it: line by line
        simple = re.match(r"^[\w./-]", command) is not None  # a program, not a subshell or a compound command
        argv = [*self.prefix, "bash", "-c", f"exec {command}" if simple else command]
        reader = None
        if program.terminal:
            leader, follower = pty.openpty()
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
            process = subprocess.Popen(
                argv, cwd=self.cwd, env={**environment, "TERM": "xterm-256color"}, stdin=follower, stdout=follower,
                stderr=follower, start_new_session=True,
            )  # fmt: skip
            os.close(follower)
            reader = threading.Thread(target=_copy_terminal, args=(leader, log), daemon=True)
            reader.start()
        else:
            with log.open("wb") as sink:
                process = subprocess.Popen(
                    argv, cwd=self.cwd, env=environment, stdin=subprocess.DEVNULL, stdout=sink,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
        running = Background(command, step, process, log, program, reader)
        self.background.append(running)
        deadline = time.monotonic() + step.timeout_seconds
        while not program.ready(running.output()):
            if process.poll() is not None:
                self.background.remove(running)
                raise StepFailed(f"`{command}` exited with {process.returncode} before it was ready "
                                 f"(waiting for {program.waits_for}):\n{running.output()[-OUTPUT_TAIL:]}")  # fmt: skip
            if time.monotonic() > deadline:
                raise StepFailed(f"`{command}` was not ready within {step.timeout_seconds:g} s (waiting for "
                                 f"{program.waits_for}):\n{running.output()[-OUTPUT_TAIL:]}")  # fmt: skip
            time.sleep(0.1)
        running.remember_tree()

    def _background_of(self, command: str) -> Background:
        wanted = _words(command)
        for running in self.background:
            if _words(running.command) == wanted:
                return running
        started = ", ".join(f"`{running.command}`" for running in self.background) or "none"
        raise StepFailed(f"Ctrl-C of `{command}`: the page started no such command (running: {started})")

    def _ctrl_c(self, running: Background) -> None:
        """Interrupt a background command as Ctrl-C in its terminal does, and check that it stops as it should."""
        self.background.remove(running)
        running.remember_tree()
        code = running.process.poll()
        if code is not None:
            raise StepFailed(f"`{running.command}` had already exited ({code}) before Ctrl-C:\n"
                             f"{running.output()[-OUTPUT_TAIL:]}")  # fmt: skip
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.process.pid, signal.SIGINT)
        try:
            code = running.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            _kill_group(running.process.pid)
            running.process.wait()
            raise StepFailed(f"`{running.command}` did not stop within {STOP_SECONDS:g} s of Ctrl-C:\n"
                             f"{running.output()[-OUTPUT_TAIL:]}") from None  # fmt: skip
        finally:
            if running.reader is not None:
                running.reader.join(5)
        if code not in STOPPED_BY_CTRL_C:
            raise StepFailed(f"`{running.command}` exited with {code} on Ctrl-C:\n{running.output()[-OUTPUT_TAIL:]}")
        left = [process for process in running.tree if _alive(process)]
        if left:
            _wait_gone(left, 30)
            left = [process for process in left if _alive(process)]
        if left:
            for process in left:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            raise StepFailed(f"`{running.command}` stopped on Ctrl-C and left {_describe(left)} running")

    def finish(self) -> list[StepResult]:
        """Ctrl-C to what still runs, latest first (a stack before the cloud it runs in), as a reader ends the
        page; then nothing the page started may be left. Returns the failures, against the steps that started
        the commands."""
        failures = []
        for running in reversed(list(self.background)):
            try:
                self._ctrl_c(running)
            except StepFailed as failure:
                failures.append(StepResult(running.step, "failed", detail=f"at the end of the page: {failure}"))
        left = _marked(self.environment[MARKER])
        if left:
            _wait_gone(left, 15)
            left = [process for process in left if _alive(process)]
        if left:
            description = _describe(left)
            for process in left:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            failures.append(StepResult(failures[0].step if failures else _page_end(self.page), "failed",
                                       detail=f"the page left processes running: {description}"))  # fmt: skip
        return failures


def _words(command: str) -> list[str]:
    """A command as the shell splits it, without its comment."""
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def _shown_lines(code: str) -> list[str]:
    """What `print(...)  # TEXT` lines say they print (TEXT with `...` is an abbreviation, not checked)."""
    shown = [match.group(1).strip() for line in code.splitlines() if (match := _SHOWN.search(line))]
    return [text for text in shown if "..." not in text]


def _copy_terminal(leader: int, log: Path) -> None:
    with log.open("ab") as sink:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            sink.write(chunk)
            sink.flush()
    os.close(leader)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(processes: list[psutil.Process], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while any(_alive(process) for process in processes) and time.monotonic() < deadline:
        time.sleep(0.2)


def _describe(processes: list[psutil.Process]) -> str:
    parts = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            parts.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
    return "; ".join(parts)


def _group(pgid: int) -> list[psutil.Process]:
    """Living processes of a process group."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(process.pid) == pgid and _alive(process):
                found.append(process)
    return found


def _marked(marker: str) -> list[psutil.Process]:
    """Living processes whose environment carries the page's marker."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.pid != os.getpid() and process.environ().get(MARKER) == marker and _alive(process):
                found.append(process)
    return found


def _page_end(page: str) -> Step:
    return Step(page, 0, Kind.CTRL_C, "the end of the page")
