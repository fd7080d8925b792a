"""A rig's watchdog: `python watchdog.py OWNER_PID NUMBER`, reading a pipe from the process that made the rig. When
the pipe closes (the rig closed, or its maker was killed: SIGKILL included), it removes what is left of the rig: every
process in the rig's namespaces (a host's first process takes its whole PID namespace with it), then the namespaces
(their links, queues and firewall rules go with them; the hosts' mounts went with their processes).

Started in a session of its own, so that a signal to its maker's process group spares it; the suite's reaper
(tests/reaping.py) removes the same names if it was killed too. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys


def ip(*argv: str) -> str:
    try:
        return subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def remove_rig(owner_pid: int, number: int | None = None) -> list[str]:
    """Remove the namespaces of the rigs `owner_pid` made (of its rig `number` only, when given) and everything
    running in them; returns their names."""
    mine = re.compile(rf"^rig{owner_pid}n{number if number is not None else '[0-9]+'}[rh][0-9]*$")
    names = [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]
    removed = [name for name in names if mine.match(name)]
    for name in sorted(removed, key=lambda each: each.endswith("r")):  # hosts first, then the router
        for _round in range(3):  # a process may fork while its siblings die
            pids = ip("netns", "pids", name).split()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        ip("netns", "delete", name)
    return removed


def main() -> None:
    owner_pid, number = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the test run: wait for the pipe to close
    while sys.stdin.buffer.read(4096):
        pass
    remove_rig(owner_pid, number)


if __name__ == "__main__":
    main()
