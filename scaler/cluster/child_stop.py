"""How `scaler FILE` stops what it started: its children in reverse start order, then what they started.

One grace period is shared by the whole stop: each child gets SIGTERM (the latest started first) and half of what is
left of the grace, then all of them the rest. What the children started (a manager's workers, a scheduler's object
storage) may still be stopping when its parent is gone, more so on a loaded machine: every descendant seen is waited
for within what is left of the grace, and only one that outlived it is a leftover, killed and named by what it ran
(read when it was first seen: a process that is exiting says nothing of itself).

A stop in a hurry (`hurried()` true: a second Ctrl-C, before the stop or during it) waits no more for the order:
whatever still runs gets SIGTERM at once and HURRY_SECONDS to end (object storage removes its shared memory), then is
killed, said in one line, not as leftovers one by one.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

import psutil

logger = logging.getLogger(__name__)

#: A process seen, and what it ran (its name in the log).
Named = dict[int, tuple[psutil.Process, str]]
#: How often the waits look at the processes (and at `hurried`).
POLL_SECONDS = 0.05
#: How long a stop in a hurry gives every process still running after its SIGTERM.
HURRY_SECONDS = 2.0


def stop_in_order(
    children: Sequence[tuple[str, subprocess.Popen[bytes]]],
    grace_seconds: float,
    hurried: Callable[[], bool] = lambda: False,
) -> None:
    """Stop `children` (name, process), in the order given, and their descendants (module docstring)."""
    descendants = _named(_descendants(), {})
    deadline = time.monotonic() + grace_seconds
    for name, process in reversed(children):
        if process.poll() is None and not hurried():
            logger.info("stopping %s (pid %d)", name, process.pid)
            try:
                process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            _wait_until(_exited([process]), time.monotonic() + (deadline - time.monotonic()) / 2, hurried)
    _wait_until(_exited([process for _, process in children]), deadline, hurried)
    descendants = _named(_descendants(), descendants)
    stopping = [process for process, _ in descendants.values() if _running(process)]
    # a zombie nobody reaps (pid 1 of a container) is gone too
    _wait_until(lambda: not any(_running(process) for process in stopping), deadline, hurried)
    leftovers = [process for process in stopping if _running(process)]
    if hurried() and leftovers:
        logger.warning("stopping now (interrupted again): the %d process(es) still running get %g s, then are killed",
                       len(leftovers), HURRY_SECONDS)  # fmt: skip
        for process in leftovers:
            _terminate(process)
        _wait_until(lambda: not any(_running(process) for process in leftovers), time.monotonic() + HURRY_SECONDS,
                    lambda: False)  # fmt: skip
        leftovers = [process for process in leftovers if _running(process)]
    else:
        for process in leftovers:
            logger.warning("killing leftover process %d (%s): it did not stop within %g s", process.pid,
                           descendants[process.pid][1], grace_seconds)  # fmt: skip
    for process in leftovers:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(leftovers, timeout=5)
    for _, process in children:
        if process.poll() is None:
            process.kill()
            process.wait()


def _terminate(process: psutil.Process) -> None:
    try:
        process.terminate()
    except psutil.Error:
        pass


def _exited(processes: list[subprocess.Popen[bytes]]) -> Callable[[], bool]:
    return lambda: all(process.poll() is not None for process in processes)


def _wait_until(done: Callable[[], bool], deadline: float, hurried: Callable[[], bool]) -> None:
    """Until `done()`, the deadline, or a hurry."""
    while not done() and not hurried() and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)


def _descendants() -> list[psutil.Process]:
    try:
        children: list[psutil.Process] = psutil.Process(os.getpid()).children(recursive=True)
        return children
    except psutil.Error:
        return []


def _running(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _named(processes: list[psutil.Process], known: Named) -> Named:
    """`known` with the processes not in it yet, each with what it runs, by pid."""
    named = dict(known)
    for process in processes:
        if process.pid not in named:
            named[process.pid] = (process, _name(process))
    return named


def _name(process: psutil.Process) -> str:
    """What the process runs: its module (`-m scaler.worker.process`), or its command."""
    try:
        command: list[str] = process.cmdline()
    except psutil.Error:
        return "?"
    if "-m" in command[:-1]:
        return command[command.index("-m") + 1]
    return " ".join(command[:3])[:80] or "?"
