"""The rehearsals' units are local process groups (scaler_rehearsal/process_groups.py). A group is signalled by its
leader's pid, which stays the group's own only while the leader is not reaped: once reaped with no member left, the
kernel may give that number to a later process (pid_max wraps within one run of the suite), and a `killpg` of it
would reach an unrelated group. So a rehearsal learns that a leader exited without reaping it, signals its group, and
reaps it last; a reaped leader's group is never signalled."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from scaler_rehearsal.process_groups import exit_status, group_alive, reap, signal_group, start_group
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

#: A leader that starts a member of its own group which outlives it, prints the member's pid, and exits with 3.
LEADER = "import subprocess, sys; m = subprocess.Popen(['sleep', '60']); print(m.pid, flush=True); sys.exit(3)"


def test_an_exited_leader_is_followed_unreaped_and_its_group_signalled_until_it_is_reaped(tmp_path: Path) -> None:
    """Checked to fail with `exit_status` reaping (`leader.poll()`): the leader is no zombie once its exit is known,
    and `signal_group` then leaves the member running."""
    log = tmp_path / "leader.log"
    leader = start_group([sys.executable, "-c", LEADER], {}, log, None)
    try:
        wait_for(lambda: exit_status(leader) is not None, "the leader to exit", 30)
        assert exit_status(leader) == 3
        assert psutil.Process(leader.pid).status() == psutil.STATUS_ZOMBIE, "its exit is known, its pid still held"
        wait_for(lambda: log.read_text().strip() != "", "the member's pid", 30)
        member = psutil.Process(int(log.read_text().split()[0]))
        assert member.is_running() and group_alive(leader), "the member runs on"
        signal_group(leader, signal.SIGKILL)
        wait_for(lambda: not group_alive(leader), "the member to end with its group", 30)
        reap(leader, 10.0)
        assert leader.returncode == 3
    finally:
        signal_group(leader, signal.SIGKILL)
        if leader.returncode is None:
            leader.wait(10)


def test_a_reaped_leaders_group_id_is_not_signalled() -> None:
    """The pid of a reaped leader whose group is empty is not the group's any more: `signal_group` sends nothing.
    Checked with a process that takes a reaped leader's place: a `killpg` of the old id would reach it (here the same
    number is simulated by pointing the reaped Popen at a live group's id)."""
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stale = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    stale.wait(30)
    try:
        stale.pid = bystander.pid  # the number a later process was given
        signal_group(stale, signal.SIGKILL)
        with pytest.raises(subprocess.TimeoutExpired):  # a SIGKILL sent would have ended it well within this
            bystander.wait(1.0)
    finally:
        bystander.kill()
        bystander.wait(10)
