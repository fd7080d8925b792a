"""One container of the rehearsal's kubelet: a local process group (a new session, so that everything it starts
stops with it), its log, its memory limit (the group's resident memory over the limit is an OOM kill, SIGKILL, as the
kernel's cgroup would do it) and its stop: SIGTERM, then SIGKILL once the grace period is over. When its first
process ends, the rest of its group is killed, as a container's processes end with its init process. Its first
process also dies with the rehearsal, even one killed with SIGKILL (`setpriv --pdeathsig KILL`, where util-linux's
setpriv is installed)."""

from __future__ import annotations

import os
import shutil
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

from scaler_rehearsal.process_groups import exit_status, group_alive, reap, signal_group, start_group

#: Runs a command with the parent-death signal set (util-linux); None where it is not installed.
SETPRIV = shutil.which("setpriv")
#: How often a container's memory is measured against its limit.
MEMORY_CHECK_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class Exit:
    code: int
    reason: str  #: Completed, Error, OOMKilled
    started_at: float
    finished_at: float
    container_id: str


class Container:
    def __init__(
        self,
        argv: list[str],
        environment: dict[str, str],
        cwd: Path,
        log_path: Path,
        memory_limit_bytes: int | None,
        now: float,
    ) -> None:
        self.process = start_group(
            [SETPRIV, "--pdeathsig", "KILL", "--", *argv] if SETPRIV else argv, environment, log_path, cwd
        )
        self.container_id = f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}"
        self.log_path = log_path
        self.started_at = now
        self._memory_limit = memory_limit_bytes
        self._memory_checked_at = now
        self._oom_killed = False
        self._term_at: float | None = None
        self._kill_at: float | None = None
        self.exit: Exit | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def is_running(self) -> bool:
        return self.exit is None

    def stop(self, now: float, grace_seconds: float) -> None:
        """SIGTERM now, SIGKILL at `now + grace_seconds` (an earlier deadline given later wins)."""
        if self.exit is not None:
            return
        if self._term_at is None:
            self._term_at = now
            self._signal(signal.SIGTERM)
        deadline = now + max(0.0, grace_seconds)
        self._kill_at = deadline if self._kill_at is None else min(self._kill_at, deadline)

    def oom_kill(self) -> None:
        """What the kernel does to a container over its memory limit."""
        if self.exit is None:
            self._oom_killed = True
            self._signal(signal.SIGKILL)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def step(self, now: float) -> Exit | None:
        """Follow the process: the Exit once it ended (its group killed with it), else None."""
        if self.exit is not None:
            return self.exit
        code = exit_status(self.process)  # not reaped: its group's id stays its own until `release`
        if code is None:
            if self._kill_at is not None and now >= self._kill_at:
                self._signal(signal.SIGKILL)
            elif self._memory_limit and now - self._memory_checked_at >= MEMORY_CHECK_SECONDS:
                self._memory_checked_at = now
                if self._group_memory() > self._memory_limit:
                    self.oom_kill()
            return None
        self._signal(signal.SIGKILL)  # the rest of the container's processes end with its first one
        if code < 0:
            code = 128 - code  # killed by a signal: the runtime reports 128 + its number
        if self._oom_killed:
            reason = "OOMKilled"
        else:
            reason = "Completed" if code == 0 else "Error"
        self.exit = Exit(code, reason, self.started_at, now, self.container_id)
        return self.exit

    def group_alive(self) -> bool:
        return group_alive(self.process)

    def release(self) -> None:
        """The container is done with: its group killed, its first process reaped."""
        reap(self.process, 5.0)

    def _group(self) -> list[psutil.Process]:
        try:
            leader = psutil.Process(self.process.pid)
            members = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            members = []
        return [process for process in members if _group_of(process) == self.process.pid]

    def _group_memory(self) -> int:
        total = 0
        for process in self._group():
            try:
                total += process.memory_info().rss
            except psutil.Error:
                continue
        return total

    def _signal(self, signum: int) -> None:
        signal_group(self.process, signum)


def _group_of(process: psutil.Process) -> int:
    try:
        return os.getpgid(process.pid)
    except (ProcessLookupError, PermissionError):
        return -1
