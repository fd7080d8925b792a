"""A rehearsal's unit as a local process group: started in a new session (so that everything it starts stops with
it: `sh -c` does not exec its command, so signalling the shell alone would orphan the rest), its output appended to
its log; signalled as a group."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


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


def signal_group(leader_pid: int, signum: int) -> None:
    """Send `signum` to the process group `leader_pid` leads; a group that is gone, or not ours to signal, is left."""
    try:
        os.killpg(leader_pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
