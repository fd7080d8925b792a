"""A command the fake cloud runs for a task, an instance or a job: a local process group with its own log."""

from __future__ import annotations

import signal
from pathlib import Path

from scaler_rehearsal.process_groups import exit_status, group_alive, reap, signal_group, start_group

#: How long a stopped resource's processes get between SIGTERM and SIGKILL.
STOP_GRACE_SECONDS = 5.0


class LaunchedProcess:
    """One resource's command, started in a new session so that its whole process tree stops together
    (`sh -c` does not exec its command, so killing the shell alone would orphan the workers)."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, cwd: Path | None = None) -> None:
        self.process = start_group(argv, env, log_path, cwd)
        self.log_path = log_path
        self._stop_requested_at: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        """The command's exit code once it ended; its leader is reaped only by `kill` (see `signal_group`)."""
        return exit_status(self.process)

    def group_alive(self) -> bool:
        """Whether any process of the group is still running (zombies, waiting to be reaped, do not count)."""
        return group_alive(self.process)

    def stop(self, now: float) -> None:
        """SIGTERM the group now; `step` sends SIGKILL after the grace period."""
        if self._stop_requested_at is None and self.exit_code() is None:
            self._stop_requested_at = now
            self._signal_group(signal.SIGTERM)

    def step(self, now: float) -> None:
        if self._stop_requested_at is not None and now - self._stop_requested_at > STOP_GRACE_SECONDS:
            self._signal_group(signal.SIGKILL)

    def kill(self) -> None:
        reap(self.process, 10.0)

    def _signal_group(self, signum: int) -> None:
        signal_group(self.process, signum)
