"""A rehearsal's unit as a local process group: started in a new session (so that everything it starts stops with
it: `sh -c` does not exec its command, so signalling the shell alone would orphan the rest), its output appended to
its log; signalled as a group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil


def start_group(
    argv: list[str], environment: dict[str, str], log_path: Path, cwd: Path | None
) -> subprocess.Popen[bytes]:
    """Start `argv` as the leader of a new session, stdin empty, stdout and stderr appended to `log_path` (its folder
    made if need be)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            env=environment,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def exit_status(leader: subprocess.Popen[Any]) -> int | None:
    """The leader's exit code once it has exited (a signal's: its negative number), else None, without reaping it:
    a zombie keeps its pid, so the group's id stays this group's until `reap`."""
    if leader.returncode is not None:
        return leader.returncode
    try:
        info = os.waitid(os.P_PID, leader.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped by someone else: nothing left to wait for
        return leader.poll()
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def signal_group(leader: subprocess.Popen[Any], signum: int) -> None:
    """Send `signum` to the process group `leader` leads; a group that is gone, or not ours to signal, is left.

    Only while the leader is not reaped: its pid (a zombie's too) is then the group's id and no other process can be
    given it. Once reaped, a group with no member left frees that id for any later process (pid_max wraps within
    one run of the suite), so a signal to it could reach an unrelated group: the rehearsals follow a leader with
    `exit_status`, signal its group, and reap it last (`reap`)."""
    if leader.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader.pid, signum)


def group_alive(leader: subprocess.Popen[Any]) -> bool:
    """Whether a process of the group, the leader's own included, still runs (zombies do not count)."""
    if exit_status(leader) is None:
        return True
    if leader.returncode is not None:  # reaped: its group's id is no longer known to be its own
        return False
    for process in psutil.process_iter(["status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == leader.pid:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def reap(leader: subprocess.Popen[Any], timeout_seconds: float) -> None:
    """SIGKILL the group, then wait for its leader (after which the group is not signalled again)."""
    signal_group(leader, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        leader.wait(timeout_seconds)
