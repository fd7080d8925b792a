"""Runs one workload subprocess: own process group, timeout, output to files, result line parsed.

Output goes to files, not pipes: cluster processes inherit stdout/stderr, and a straggler holding a pipe open
would block the reader. After the run the whole process group is killed, then every orphan the driver inherited
as a subreaper (processes that had moved to a session of their own), so no straggler (a worker that outlived its
cluster) can disturb the next run.
"""

import ctypes
import dataclasses
import json
import os
import resource
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

MARKER = "BENCH-RESULT "
PR_SET_CHILD_SUBREAPER = 36
TAIL_LINES = 25


@dataclasses.dataclass
class Outcome:
    status: str  # "ok" | "failed" | "timeout"
    returncode: int | None
    wall_seconds: float
    payload: dict[str, Any] | None
    stderr_tail: str
    own_cpu_seconds: float  # CPU of the subprocess and the descendants it reaped
    machine_busy_seconds: float | None  # CPU used on the whole machine meanwhile (None off Linux)

    @property
    def foreign_cpu_fraction(self) -> float | None:
        """Share of the machine's CPU capacity used by processes outside this run: >0.1 means a noisy run."""
        if self.machine_busy_seconds is None or self.wall_seconds <= 0:
            return None
        foreign = max(0.0, self.machine_busy_seconds - self.own_cpu_seconds)
        return foreign / (self.wall_seconds * (os.cpu_count() or 1))


def machine_busy_seconds() -> float | None:
    """Busy CPU seconds of the whole machine since boot, from /proc/stat (all CPUs, not idle nor iowait)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / ticks


def busy_fraction(window: float = 0.5) -> float | None:
    before = machine_busy_seconds()
    time.sleep(window)
    after = machine_busy_seconds()
    if before is None or after is None:
        return None
    return (after - before) / (window * (os.cpu_count() or 1))


def wait_until_quiet(threshold: float, max_wait: float) -> float | None:
    """Waits (up to `max_wait` s) until the machine's busy share over 0.5 s is below `threshold`. Returns it."""
    deadline = time.monotonic() + max_wait
    while True:
        fraction = busy_fraction()
        if fraction is None or fraction < threshold or time.monotonic() >= deadline:
            return fraction


def become_subreaper() -> None:
    """Linux: orphaned descendants of a run are re-parented to this driver instead of init, so that when they are
    reaped their CPU time lands in RUSAGE_CHILDREN and the per-run CPU accounting stays complete."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _own_children() -> list[int]:
    """Pids whose parent is this driver, from /proc (the driver has no other children between runs)."""
    me, children = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                children.append(int(entry))
    return children


def _kill_orphans(deadline_seconds: float = 10.0) -> None:
    """Kill and reap what is left of a run outside its process group (e.g. workers in a session of their own):
    as a subreaper the driver inherits them once their parents are gone."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        children = _own_children() if Path("/proc").is_dir() else []
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, os.WNOHANG)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass
        time.sleep(0.02)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _parse(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                parsed: dict[str, Any] = json.loads(line[len(MARKER) :])
                return parsed
            except json.JSONDecodeError:
                return None
    return None


def run(command: list[str], timeout: float, env: dict[str, str] | None = None) -> Outcome:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        cpu_before, busy_before, start = _children_cpu(), machine_busy_seconds(), time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True, env=env)
        try:
            returncode: int | None = process.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(process.pid, signal.SIGTERM)
            time.sleep(2)
            returncode, timed_out = None, True
        except BaseException:  # Ctrl-C: the run is in its own session, so the terminal's SIGINT did not reach it
            _kill_group(process.pid)
            _kill_orphans()
            raise
        _kill_group(process.pid)  # also kills stragglers of a run that exited normally
        process.wait()
        _kill_orphans()
        wall = time.perf_counter() - start
        busy_after = machine_busy_seconds()
        busy = None if busy_before is None or busy_after is None else busy_after - busy_before
        own_cpu = _children_cpu() - cpu_before
        out.seek(0)
        err.seek(0)
        payload = _parse(out.read())
        stderr_tail = "\n".join(err.read().splitlines()[-TAIL_LINES:])
    # A result printed before a failed or hung teardown still counts; the stderr tail records the teardown issue.
    status = "ok" if payload is not None else ("timeout" if timed_out else "failed")
    return Outcome(status, returncode, wall, payload, stderr_tail, own_cpu, busy)
