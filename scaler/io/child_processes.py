"""Starting and stopping the child processes of a component, so that none outlives its parent.

On Linux each child asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG), so even a
SIGKILLed parent leaves no orphan behind. Stopping is SIGTERM, a grace period, then SIGKILL.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import logging
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1

T = TypeVar("T")


def set_parent_death_signal() -> None:
    """Ask the kernel for SIGKILL when the parent of this process dies (Linux). It is tied to the parent's
    *thread* that forked: a child forked from a short-lived thread would die with that thread (hence
    `start_python_child`'s lasting thread)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError:
            pass


def start_python_child(
    module_args: Sequence[str],
    env: dict[str, str] | None = None,
    new_session: bool = False,
    die_with_parent: bool = True,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start `python -m <module_args...>` with this interpreter. The child dies with this process: the kernel ties
    the death signal to the thread that forks, so a thread other than the main one has the child started by a
    thread of this module that lives as long as the process (a cluster started from a web server's request thread,
    which then ends, lives on until it is stopped or this process exits)."""
    argv = [sys.executable, "-m", *module_args]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            env=env,
            start_new_session=new_session,
            preexec_fn=set_parent_death_signal if die_with_parent else None,
            stdin=subprocess.DEVNULL,
            pass_fds=pass_fds,
        )

    if not die_with_parent or threading.current_thread() is threading.main_thread():
        return start()
    return _LastingThread.run(start)


class _LastingThread:
    """A daemon thread that never ends, started on first use: the children it forks die with this process, not
    with the thread that asked for them (PR_SET_PDEATHSIG follows the forking thread)."""

    _lock = threading.Lock()
    _requests: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] | None = None

    @classmethod
    def run(cls, call: Callable[[], T]) -> T:
        with cls._lock:
            if cls._requests is None:
                cls._requests = queue.SimpleQueue()
                threading.Thread(target=cls._serve, args=(cls._requests,), name="scaler-child-starter",
                                 daemon=True).start()  # fmt: skip
            requests = cls._requests
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        requests.put((call, done))
        return done.result()

    @staticmethod
    def _serve(requests: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]) -> None:
        while True:
            call, done = requests.get()
            try:
                done.set_result(call())
            except BaseException as error:  # the asking thread raises it
                done.set_exception(error)


def stop_children(children: Sequence[Any], grace_seconds: float = 5.0) -> None:
    """SIGTERM every child that runs, wait up to the grace period in total, then SIGKILL the rest."""
    for child in children:
        if child.poll() is None:
            try:
                child.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_seconds
    for child in children:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            child.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            logger.warning("process %d did not stop within %.0f s; killing it", child.pid, grace_seconds)
            child.kill()
            child.wait()


def describe_exit(returncode: int | None) -> str:
    """'exit code 3', 'killed by SIGKILL', or 'running'."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


_PR_SET_NAME = 15


def name_this_process(name: str) -> None:
    """The name `ps` and psutil show for this process (at most 15 bytes; Linux only)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
        except OSError:
            pass
