"""`scaler_top` in a real terminal (tmux): the screen of a live cluster, sorting, surviving the scheduler going
away and coming back, and `q` leaving the terminal as it was."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import Client
from scaler.monitor.top_screen import size
from scaler.worker.memory import find_memory_limit
from tests.integration.conftest import (
    BIN_DIR,
    Addresses,
    Launcher,
    free_addresses,
    monitor,
    running_stack,
    session_security,
    wait_for,
)

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.xdist_group("test_scaler_top"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test installs it)"),
]


class Terminal:
    """A tmux session running a shell, 160x50, on a tmux server of its own (a socket in the test's folder): a server
    already running (the user's own) would give the shell its environment, not the test's."""

    def __init__(self, directory: Path) -> None:
        self.name = f"scaler-top-{uuid.uuid4().hex[:8]}"
        self._tmux = ["tmux", "-S", str(directory / "tmux.socket")]
        subprocess.run(
            [*self._tmux, "new-session", "-d", "-s", self.name, "-x", "160", "-y", "50", "-c", str(directory),
             "bash --norc --noprofile"],
            check=True,
        )  # fmt: skip

    def type(self, *keys: str) -> None:
        subprocess.run([*self._tmux, "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return subprocess.run(
            [*self._tmux, "capture-pane", "-p", "-t", self.name], check=True, capture_output=True, text=True
        ).stdout

    def shows(self, text: str, timeout_seconds: float = 30) -> str:
        return wait_for(
            lambda: self.screen() if text in self.screen() else "", f"{text!r} on the screen", timeout_seconds
        )

    def close(self) -> None:
        subprocess.run([*self._tmux, "kill-server"], capture_output=True)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    opened = Terminal(tmp_path)  # the shell's files (stty settings) go to the test's folder
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="module")
def two_worker_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """One stack with two workers for the module's tests that run tasks on it, read its monitor or are refused by
    it (its counters run on over the module: a test counts from the figures it finds)."""
    with running_stack(tmp_path_factory.mktemp("two-worker-stack"), workers=2) as addresses:
        yield addresses


def identity(x: int) -> int:
    return x


def test_top_shows_a_live_cluster_sorts_and_quits_cleanly(two_worker_stack: Addresses, terminal: Terminal) -> None:
    addresses = two_worker_stack
    with monitor(addresses.monitor) as next_snapshot:  # what the tests before ran is over: the count is the test's
        idle = next_snapshot(lambda snapshot: snapshot.scheduler.queued == 0 and snapshot.scheduler.running == 0)
    with Client(address=addresses.scheduler) as client:
        assert [future.result() for future in [client.submit(identity, x) for x in range(500)]] == list(range(500))
    terminal.type("stty -g > settings-before; clear", "Enter")
    terminal.type(f"{BIN_DIR / 'scaler_top'} {addresses.monitor}", "Enter")
    screen = terminal.shows("Total 2 worker(s)")
    assert "[worker]" in screen and "task_manager" in screen
    screen = terminal.shows(f"success {idle.scheduler.succeeded + 500:>7,}")
    folder = os.environ.get("SCALER_SCREENSHOTS")
    if folder:  # the screen docs/monitoring.md shows
        Path(folder).mkdir(parents=True, exist_ok=True)
        lines = [line.rstrip() for line in screen.splitlines()]
        (Path(folder) / "scaler_top.txt").write_text("\n".join(lines).strip("\n"))

    terminal.type("c")  # sort by cpu: the marked column moves
    screen = terminal.shows("[cpu]")
    assert "[worker]" not in screen
    terminal.type("q")
    terminal.type("stty -g > settings-after; cmp settings-before settings-after && echo TERMINAL-SANE", "Enter")
    terminal.shows("TERMINAL-SANE")


def test_top_shows_each_workers_memory_against_its_limit(two_worker_stack: Addresses, terminal: Terminal) -> None:
    """The mem, limit and mem% columns of a live worker: a figure, the machine's memory (no cgroup limit here) and
    the share; `u` sorts by the share. Checked by switching it off: with the worker reporting no memory (the
    heartbeat's memory fields left 0) the limit column shows "-" and the test fails."""
    addresses = two_worker_stack
    terminal.type(f"{BIN_DIR / 'scaler_top'} {addresses.monitor}", "Enter")
    screen = terminal.shows("Total 2 worker(s)")
    assert " mem " in screen and " limit " in screen and " mem% " in screen
    limit = find_memory_limit()
    shown_limit = size(limit.limit_bytes) + ("" if limit.source == "machine" else "*")
    screen = terminal.shows(f" {shown_limit} ")
    row = next(line for line in screen.splitlines() if shown_limit in line)
    fields = row.split()
    memory = fields[fields.index(shown_limit) - 1]
    assert memory.endswith("m") and float(memory[:-1]) > 1, row  # the agent and its processors: megabytes
    assert fields[fields.index(shown_limit) + 1].endswith("%"), row
    terminal.type("u")
    terminal.shows("[mem%]")
    terminal.type("q")


def test_top_survives_the_scheduler_going_away_and_coming_back(launcher: Launcher, terminal: Terminal) -> None:
    addresses, scheduler, _storage = launcher.stack(workers=0)
    terminal.type(f"{BIN_DIR / 'scaler_top'} -t 2 {addresses.monitor}", "Enter")
    terminal.shows("Total 0 worker(s)")
    scheduler.popen.terminate()
    scheduler.wait_exit()
    terminal.shows(f"no status from {addresses.monitor}")
    launcher.scheduler(Addresses(addresses.scheduler, addresses.object_storage, addresses.monitor))
    wait_for(lambda: "no status from" not in terminal.screen(), "the screen to come back to life", 30)
    terminal.type("q")


def test_top_quits_on_ctrl_c_even_when_started_with_sigint_ignored(
    two_worker_stack: Addresses, terminal: Terminal
) -> None:
    """A program started from a non-interactive shell's `&`, nohup or a test runner inherits SIGINT ignored, and
    Python then raises no KeyboardInterrupt: scaler_top sets its own handler so that Ctrl-C still quits and leaves
    the terminal as it was. Checked by switching it off: without the handler (run_top's signal.signal) the screen
    runs on after Ctrl-C and the test fails waiting for TOP-ENDED."""
    addresses = two_worker_stack
    terminal.type("stty -g > settings-before; clear", "Enter")
    terminal.type(f"(trap '' INT; exec {BIN_DIR / 'scaler_top'} {addresses.monitor}); echo TOP-ENDED $?", "Enter")
    terminal.shows("Total 2 worker(s)")
    terminal.type("C-c")
    terminal.shows("TOP-ENDED 0")
    terminal.type("stty -g > settings-after; cmp settings-before settings-after && echo TERMINAL-SANE", "Enter")
    terminal.shows("TERMINAL-SANE")


def test_top_with_another_users_keys_names_the_export_that_fixes_it(
    two_worker_stack: Addresses, terminal: Terminal, tmp_path: Path
) -> None:
    """issue 60: scaler_top given the keys of another user (their own server and client pairs) said what was wrong,
    not what to do: it names `scaler_keygen export DIR --role client` (troubleshooting.md's answer) and the flags
    that take its files. Checked to fail before: the line ended at "started with --insecure)"."""
    addresses = two_worker_stack
    other = tmp_path / "other-users-keys"
    for name in ("server", "client"):
        subprocess.run([str(BIN_DIR / "scaler_keygen"), str(other), name], check=True, capture_output=True)
    terminal.type(
        f"{BIN_DIR / 'scaler_top'} {addresses.monitor} --curve-secret-key {other}/client.key_secret "
        f"--curve-server-key {other}/server.key 2> top.err; echo TOP-ENDED $?",
        "Enter",
    )
    terminal.shows("TOP-ENDED 2")
    said = " ".join((tmp_path / "top.err").read_text().split())
    assert "the CURVE handshake did not complete" in said, said
    assert "run `scaler_keygen export DIR --role client` as the scheduler's user, then give scaler_top " in said


def test_top_as_another_user_says_its_keys_are_refused_within_seconds(
    two_worker_stack: Addresses, terminal: Terminal, tmp_path: Path
) -> None:
    """issue 77, item 9: scaler_top run by another user (their own keys, found in their own folder; none of this
    stack's connection files) ends with the refusal and exit code 2 after a refusal in passing (3 s), no longer after
    the 30 s a reader waits for a stack it has read to publish other keys (test_connecting_sides.py checks the
    mechanism with that wait made an hour)."""
    addresses = two_worker_stack
    other = tmp_path / "another-user"
    terminal.type(
        f"XDG_CONFIG_HOME={other} {BIN_DIR / 'scaler_top'} {addresses.monitor} 2> top.err; echo TOP-ENDED $?", "Enter"
    )
    terminal.shows("TOP-ENDED 2")
    said = " ".join((tmp_path / "top.err").read_text().split())
    assert "the CURVE handshake did not complete" in said, said
    assert "run `scaler_keygen export DIR --role client` as the scheduler's user" in said, said


def fail_on_odd(x: int) -> int:
    if x % 2:
        raise ValueError(f"odd {x}")
    return x


def test_top_lists_a_detached_job_with_its_progress_failures_and_owner(
    two_worker_stack: Addresses, terminal: Terminal
) -> None:
    """A job whose submitter has left, on the screen with its tasks done and failed and its submitter gone. Checked
    by switching it off: with the jobs left off the status (codec_monitor writing no jobs) no row appears."""
    addresses = two_worker_stack
    with Client(address=addresses.scheduler) as client:
        job = client.map_job(fail_on_odd, range(6), name="nightly-risk")
        concurrent.futures.wait(job.futures)
    terminal.type(f"{BIN_DIR / 'scaler_top'} {addresses.monitor}", "Enter")
    screen = terminal.shows("nightly-risk")
    row = next(line for line in screen.splitlines() if "nightly-risk" in line).split()
    assert row[:4] == ["nightly-risk", "done", "6/6", "3"], row
    owner = session_security("client").public.decode()  # secure by default: the job is the client key's
    assert "(gone)" in row and row[-2] != "-" and owner.startswith(row[-2]), row
    terminal.type("q")


def test_top_at_a_1_x_default_monitor_name_shows_the_scheduler_at_its_port_plus_2(
    two_worker_stack: Addresses, terminal: Terminal
) -> None:
    """Seed 002's `scaler_top ipc:///tmp/127.0.0.1_2345_monitor` for a scheduler at tcp://127.0.0.1:2345 (here a free
    port): no such socket exists, so the screen reads the scheduler's monitor at its port + 2, and says so. Checked by
    switching it off: with `monitor_address_to_read` returning the address as given, the screen waits for a status
    forever and the test fails waiting for the worker."""
    addresses = two_worker_stack
    name = f"ipc:///tmp/127.0.0.1_{addresses.scheduler.rpartition(':')[2]}_monitor"
    assert not Path(name.removeprefix("ipc://")).exists()
    terminal.type("clear", "Enter")
    terminal.type(f"{BIN_DIR / 'scaler_top'} {name}; echo TOP-ENDED $?", "Enter")
    screen = terminal.shows("Total 2 worker(s)")
    assert "task_manager" in screen
    terminal.type("q")
    screen = terminal.shows("TOP-ENDED 0")
    assert f"scaler_top: reading the monitor at {addresses.monitor}: {name} is the default monitor name" in screen


def test_without_a_terminal_top_says_it_needs_one_and_exits_2(launcher: Launcher) -> None:
    """Input from /dev/null, output to a file (the launcher's): one line, exit 2. Checked by switching it off: without
    the check, curses died with a `_curses.error: cbreak() returned ERR` traceback and exit code 1."""
    top = launcher.start("scaler_top", free_addresses().monitor)
    assert top.wait_exit() == 2
    log = top.log_text()
    assert log.startswith("scaler_top: error: scaler_top needs a terminal") and log.count("\n") == 1, log
    assert "Traceback" not in log


def test_a_malformed_address_exits_2(launcher: Launcher) -> None:
    service = launcher.start("scaler_top", "not-an-address")
    assert service.wait_exit() == 2
    assert "not-an-address" in service.log_text()
