"""issue 60, item 4: Ctrl-C of `scaler FILE` in a real terminal (tmux: the terminal's SIGINT goes to its foreground
process group, as a user's Ctrl-C does), on a quiet machine and on one loaded by busy processes of the test's own.

- A running stack with workers stops in order, says nothing of leftover processes (children still stopping when the
  launcher looked were killed and named `killing leftover process N ()`, each pid twice, on a loaded machine) and
  exits 0, with every process of the stack gone.
- A Ctrl-C in the first seconds, while object storage, the scheduler, the dashboard or the manager starts, stops the
  stack with no child's KeyboardInterrupt traceback, no false "exited before it registered" or "exited during
  start-up", and exit code 0.

Checked to fail before (scaler/cluster/launcher.py and readiness.py as on main): the first seconds gave a
KeyboardInterrupt traceback of the object storage server and exit code 1 ("start-up failed: the object storage
server ... exited during start-up: killed by SIGINT"); the running stop on the loaded machine named leftovers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from scaler import Client
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import (
    BIN_DIR,
    COLD_START_SECONDS,
    ProcessWatch,
    is_alive,
    kill_tree,
    run_script,
    wait_all_gone,
    wait_for,
    wait_for_workers,
)
from tests.integration.test_launcher import stack_file
from tests.integration.test_scaler_top import Terminal

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
    pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
                       reason="tmux is not installed (make test installs it)"),
]  # fmt: skip

#: What no stop may print.
NEVER = ("Traceback", "KeyboardInterrupt", "killing leftover", "exited before it registered", "exited during start-up",
         "start-up failed")  # fmt: skip


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    opened = Terminal(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


#: A busy process: says it runs, then spins.
BUSY = "print('busy', flush=True)\nwhile True: pass"


class MachineLoad:
    """A loaded machine, when the test runs loaded: two busy processes per core from `start()` to `stop()` (or the
    end of the test: the process watch stops them)."""

    def __init__(self, is_loaded: bool, processes: ProcessWatch) -> None:
        self.is_loaded = is_loaded
        self._processes = processes
        self._busy: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        """Start the busy processes (when loaded) and return once each spins."""
        if not self.is_loaded:
            return
        self._busy = [
            self._processes.add(
                subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
            )
            for _ in range(2 * (os.cpu_count() or 1))
        ]
        for popen in self._busy:
            assert popen.stdout is not None and popen.stdout.readline() == b"busy\n"

    def stop(self) -> None:
        """End the busy processes: what the test checks under load is over."""
        for popen in self._busy:
            popen.kill()
        for popen in self._busy:
            popen.wait()


@pytest.fixture(params=[False, True], ids=["quiet", "loaded"])
def load(request: pytest.FixtureRequest, processes: ProcessWatch) -> MachineLoad:
    return MachineLoad(bool(request.param), processes)


def local_stack(tmp_path: Path) -> tuple[Path, str, str]:
    """The `local` example with free ports (the dashboard's too); (path, scheduler, monitor)."""
    path, scheduler, monitor = stack_file(tmp_path, template="local.toml")
    text = path.read_text().replace("tcp://127.0.0.1:8518", monitor)
    path.write_text(text.replace("127.0.0.1:50001", f"127.0.0.1:{free_tcp_port_block(1)}"))
    return path, scheduler, monitor


class TerminalStack:
    """`scaler FILE` typed in the terminal, its output in a file (a pipe would take the Ctrl-C too)."""

    def __init__(self, terminal: Terminal, path: Path) -> None:
        self.terminal = terminal
        self.log_path = path.parent / "stack.log"
        # SCALER-""ENDED: the typed line does not read as the end it waits for
        terminal.type(f'{BIN_DIR / "scaler"} {path} > {self.log_path} 2>&1; echo SCALER-""ENDED $?', "Enter")
        launcher: psutil.Process = wait_for(lambda: _launcher_of(path), "the launcher to run", 30)
        self.launcher = launcher
        self.seen: dict[int, psutil.Process] = {launcher.pid: launcher}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def remember(self) -> None:
        try:
            for process in self.launcher.children(recursive=True):
                self.seen.setdefault(process.pid, process)
        except psutil.Error:
            pass

    def ctrl_c_when(self, line: str) -> None:
        """Ctrl-C as soon as the log has `line`; for "", as soon as the launcher has started a child (a Ctrl-C while
        the launcher's own interpreter starts is Python's: "Fatal Python error: init_import_site")."""
        while (line not in self.log()) if line else not self.launcher.children():
            self.remember()
            assert is_alive(self.launcher), self.log()
            time.sleep(0.01)
        self.remember()
        self.terminal.type("C-c")

    def ended(self) -> int:
        screen = self.terminal.shows("SCALER-ENDED", COLD_START_SECONDS)
        return int(screen.split("SCALER-ENDED ", 1)[1].split()[0])

    def close(self) -> None:
        """Whatever the test's outcome: nothing of the stack outlives it."""
        self.remember()
        for process in self.seen.values():
            if is_alive(process):
                kill_tree(process.pid)


def _launcher_of(path: Path) -> psutil.Process | None:
    for process in psutil.process_iter():
        try:
            command = process.cmdline()
        except psutil.Error:
            continue
        if str(path) in command and any(part.endswith("/scaler") for part in command[:2]):
            return process
    return None


def slow(x: int) -> int:
    import time

    time.sleep(0.5)
    return x


def test_ctrl_c_stops_a_running_stack_with_workers_and_names_no_leftover(
    terminal: Terminal, tmp_path: Path, load: MachineLoad
) -> None:
    """The stop is what runs loaded: the machine is loaded from just before the Ctrl-C (a start-up under load is the
    first seconds' test)."""
    path, scheduler, monitor = local_stack(tmp_path)
    stack = TerminalStack(terminal, path)
    try:
        wait_for(lambda: "scaler: worker manager 'local'" in stack.log(), "the stack to be up", COLD_START_SECONDS)
        with Client(scheduler, timeout_seconds=60) as client:
            futures = [client.submit(slow, x) for x in range(40)]  # the manager starts its 4 workers
            wait_for_workers(monitor, 4, COLD_START_SECONDS)
            load.start()
            stack.remember()
            stack.ctrl_c_when("")
            assert stack.ended() == 0, stack.log()
            load.stop()  # the launcher is done: the stop it made under load is over
            assert len(stack.seen) > 8, "the launcher, its 4 children, the manager's forker and its workers"
        del futures  # they fail with the stack (the client waits a minute for it): not looked at
        log = stack.log()
        assert [word for word in NEVER if word in log] == [], log
        wait_all_gone(list(stack.seen.values()), "every process of the stack to end")
    finally:
        stack.close()


def test_a_second_ctrl_c_stops_now_and_says_so_once(terminal: Terminal, tmp_path: Path) -> None:
    """issue 77, item 8: two Ctrl-C's of a running stack printed a `killing leftover process ... did not stop within
    0 s` warning for each of its 11-13 processes, the scheduler included; a second Ctrl-C means "stop now": one line,
    and nothing left running. Checked to fail before: the second Ctrl-C, heard mid-stop, changed nothing (no "stopping
    now" line; the stop went on waiting); heard before the stop began, a "killing leftover" line per process."""
    path, scheduler, monitor = local_stack(tmp_path)
    stack = TerminalStack(terminal, path)
    try:
        wait_for(lambda: "scaler: worker manager 'local'" in stack.log(), "the stack to be up", COLD_START_SECONDS)
        with Client(scheduler, timeout_seconds=60) as client:
            futures = [client.submit(slow, x) for x in range(40)]  # the manager starts its 4 workers
            wait_for_workers(monitor, 4, COLD_START_SECONDS)
            stack.remember()
            terminal.type("C-c")
            # the second once the first is heard (two signals pending at once are one)
            wait_for(lambda: "received SIGINT: stopping" in stack.log(), "the first Ctrl-C to be heard", 30)
            terminal.type("C-c")
            assert stack.ended() == 0, stack.log()
        del futures  # they fail with the stack: not looked at
        log = stack.log()
        assert log.count("stopping now (interrupted again): the ") == 1, log
        assert "killing leftover" not in log and "Traceback" not in log, log
        wait_all_gone(list(stack.seen.values()), "every process of the stack to end")
    finally:
        stack.close()


@pytest.mark.parametrize(
    "after",
    ["", "scaler: object storage server at", "scaler: scheduler at", "scaler: dashboard at"],
    ids=["first-child", "storage-up", "scheduler-up", "dashboard-up"],
)
def test_ctrl_c_in_the_first_seconds_stops_the_stack_quietly(
    terminal: Terminal, tmp_path: Path, load: MachineLoad, after: str
) -> None:
    load.start()
    path, _scheduler, _monitor = local_stack(tmp_path)
    stack = TerminalStack(terminal, path)
    try:
        stack.ctrl_c_when(after)
        assert stack.ended() == 0, stack.log()
        load.stop()  # the launcher is done: the stop it made under load is over
        log = stack.log()
        assert [word for word in NEVER if word in log] == [], log
        wait_all_gone(list(stack.seen.values()), "every process of the stack to end")
    finally:
        stack.close()


#: A launcher with one child, which starts a grandchild and exits at once on SIGTERM; the grandchild, orphaned, takes
#: a second to stop after its SIGTERM (as a loaded machine's worker does): the launcher's stop, with its grace.
STOPPING_GRANDCHILD = """
import logging, signal, subprocess, sys, time
from scaler.cluster.launcher import Child, Launcher
from scaler.config.loader import LauncherFile

GRANDCHILD = '''
import signal, sys, time
def stop(*_):
    time.sleep(1.0)  # still stopping when its parent is gone
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(0.1)
'''
PARENT = f'''
import os, signal, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", {GRANDCHILD!r}], stdout=subprocess.PIPE, text=True)
grandchild.stdout.readline()
def stop(*_):
    grandchild.terminate()
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(0.1)
'''
logging.basicConfig(level=logging.INFO)
parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
parent.stdout.readline()
launcher = Launcher(LauncherFile(None, None, (), None), grace_seconds=10.0)
launcher._children.append(Child("parent", parent))
launcher._stop_all()
print("stopped", flush=True)
"""


def test_a_descendant_still_stopping_when_its_parent_is_gone_is_waited_for_not_killed() -> None:
    """The mechanism under the terminal's leftovers: a manager's workers, a scheduler's storage, still stopping on a
    loaded machine when their parent had gone, were killed and named leftovers at once. Checked to fail before:
    "killing leftover process N (...)"."""
    done = run_script(STOPPING_GRANDCHILD, timeout_seconds=60)
    assert done.returncode == 0 and "stopped" in done.stdout, done.stdout + done.stderr
    assert "killing leftover" not in done.stderr, done.stderr
