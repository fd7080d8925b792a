"""A pre-imported, single-threaded process that forks children on request.

Starting a Python process and importing zmq, capnp and cloudpickle costs a few hundred milliseconds of
CPU, more when several start at once on a small machine; forking a process that has them loaded costs a
few milliseconds. Two fork servers exist:

- a worker's zygote forks its processors (`scaler.worker.executors.zygote`);
- a native worker manager's forker forks its worker processes
  (`scaler.worker_manager.baremetal_native.worker_forker`).

A fork server has no thread, event loop or ZeroMQ context, so forking it is safe.

Messages on a Unix SOCK_SEQPACKET pair, one message per send:
  owner -> server: b"spawn <child id hex> <payload>", optionally with file descriptors (SCM_RIGHTS),
                   which the child receives as sockets and the server closes once it has forked
  server -> owner: b"started <child id hex> <pid>"
                   b"exited <child id hex> <wait status>"

The server ignores SIGINT and SIGTERM (its owner decides when it stops: a Ctrl-C to the process group
must not kill a running task before its worker handed it back) and stops when the owner closes its end
or dies. Its children are either

- attached (processors): they die with the server (PR_SET_PDEATHSIG), which also kills them when it
  stops, so none outlives its worker; they ignore SIGINT and SIGTERM too, but the processes they start (a
  task's subprocess or process pool) get the default SIGTERM, so that terminating them works; or
- detached (the workers of a manager): each leads a new session with the default signal handling and
  outlives the server (a restarted manager adopts it); when one exits, the server kills what is left of
  its process group before reaping it.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from scaler.io.child_processes import name_this_process, set_parent_death_signal

logger = logging.getLogger(__name__)

#: `child_main(child id, payload, sockets passed with the request)` runs in each child; returns its exit code.
ChildMain = Callable[[bytes, bytes, list[socket.socket]], int]
#: ("started", child id, pid), ("exited", child id, wait status), or ("gone", b"", 0) once the server ended.
Report = tuple[str, bytes, int]

#: Largest request (payload included) the server reads.
MAX_REQUEST_BYTES = 1 << 20
#: How long a request may wait for room in the socket (the server is stuck if it takes longer).
SEND_TIMEOUT_SECONDS = 10.0
#: How long `close()` waits for the server to exit before killing it.
CLOSE_GRACE_SECONDS = 5.0


def describe_wait_status(status: int) -> str:
    """'exit code 3', 'killed by SIGKILL (out of memory, or killed)', ... for an `os.waitpid` status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = " (out of memory, or killed)" if number == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    if os.WIFEXITED(status):
        return f"exit code {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """(the owner's end, the server's end)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


class ForkServer:
    """The owner's handle on a fork server: ask for children, read what the server reports."""

    def __init__(self, sock: socket.socket, pid: int, process: subprocess.Popen[bytes] | None = None) -> None:
        self.socket = sock  #: non-blocking; readable when reports arrive
        self.pid = pid
        self._process = process  #: when the server was started as a command rather than forked
        sock.setblocking(False)

    def request(self, child_id: bytes, payload: bytes = b"", fds: Sequence[int] = ()) -> None:
        """Ask for one child; raises OSError when the server is gone or stuck."""
        message = b"spawn " + child_id.hex().encode() + b" " + payload
        self.socket.settimeout(SEND_TIMEOUT_SECONDS)
        try:
            if fds:
                socket.send_fds(self.socket, [message], list(fds))
            else:
                self.socket.send(message)
        finally:
            self.socket.setblocking(False)

    def read_reports(self) -> list[Report]:
        """The reports available now, without waiting."""
        reports: list[Report] = []
        while True:
            try:
                data = self.socket.recv(4096)
            except BlockingIOError:
                return reports
            except OSError:  # reset, or already closed here
                return [*reports, ("gone", b"", 0)]
            if not data:
                return [*reports, ("gone", b"", 0)]
            kind, child_hex, number = data.decode().split()
            reports.append((kind, bytes.fromhex(child_hex), int(number)))

    def close(self, grace_seconds: float = CLOSE_GRACE_SECONDS) -> None:
        """Close the owner's end (the server stops) and reap the server, killing it after the grace period."""
        self.socket.close()
        deadline = time.monotonic() + grace_seconds
        while not self._reaped():
            if time.monotonic() > deadline:
                logger.warning("fork server %d did not stop within %g s: killing it", self.pid, grace_seconds)
                self.kill()
                deadline = float("inf")
            time.sleep(0.005)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _reaped(self) -> bool:
        if self._process is not None:
            return self._process.poll() is not None
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return pid != 0


def serve_forks(sock: socket.socket, child_main: ChildMain, child_name: Callable[[bytes], str], detached: bool) -> int:
    """The server's loop: fork on request, report starts and exits, return once the owner is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.setblocking(True)
    children: dict[int, bytes] = {}
    try:
        while True:
            try:
                watched: list[Any] = [sock, wake_read]
                readable: list[Any] = select.select(watched, [], [])[0]
            except InterruptedError:
                readable = []
            if wake_read in readable:
                os.read(wake_read, 4096)
            _reap(children, sock, detached)
            if sock in readable:
                data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST_BYTES, 8)
                if not data:
                    return 0
                _, child_hex, payload = data.split(b" ", 2)
                child_id = bytes.fromhex(child_hex.decode())
                passed = [socket.socket(fileno=fd) for fd in fds]
                pid = _fork_child(sock, (wake_read, wake_write), child_main, child_id, payload, passed,
                                  child_name(child_id), detached)  # fmt: skip
                for passed_socket in passed:
                    passed_socket.close()
                children[pid] = child_id
                sock.send(f"started {child_hex.decode()} {pid}".encode())
    finally:
        if not detached:
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _fork_child(
    sock: socket.socket,
    wake_pipe: tuple[int, int],
    child_main: ChildMain,
    child_id: bytes,
    payload: bytes,
    passed: list[socket.socket],
    name: str,
    detached: bool,
) -> int:
    """Fork one child and return its pid once the child has set itself up (its session, its signals), so
    that a signal the owner sends after the "started" report is never lost or sent to the wrong group."""
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid != 0:
        os.close(ready_write)
        try:
            os.read(ready_read, 1)  # one byte when ready; nothing if the child died first
        finally:
            os.close(ready_read)
        return pid
    code = 1
    try:
        os.close(ready_read)
        sock.close()
        signal.set_wakeup_fd(-1)
        for fd in wake_pipe:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if detached:
            os.setsid()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        else:  # SIGINT stays ignored (see the module docstring); SIGTERM does not stop the child either
            set_parent_death_signal()
            _shield_from_sigterm()
        name_this_process(name)
        os.write(ready_write, b"r")
        os.close(ready_write)
        code = child_main(child_id, payload, passed)
    except BaseException:
        logger.exception("child %s of the fork server crashed", name)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _shield_from_sigterm() -> None:
    """SIGTERM does not stop this (attached) child, but it does stop the processes the child starts. An ignored
    signal stays ignored in every process forked or executed below, so a task's `Popen.terminate()` or
    `multiprocessing.Pool.terminate()` (which joins the pool's processes after sending them SIGTERM) would wait
    forever; a caught one is reset to the default by exec, and in a process forked from Python by the hooks below
    (SIGTERM is held during the fork, so that one sent to the new process at once is not lost to the no-op)."""
    signal.signal(signal.SIGTERM, _sigterm_not_for_this_process)
    os.register_at_fork(before=_hold_sigterm, after_in_parent=_release_sigterm, after_in_child=_default_sigterm)


def _sigterm_not_for_this_process(signum: int, frame: Any) -> None:
    """A SIGTERM to an attached child: nothing (its owner stops it; see the module docstring)."""


_held_before_fork = threading.local()


def _hold_sigterm() -> None:
    _held_before_fork.already = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _release_sigterm() -> None:
    if not getattr(_held_before_fork, "already", True):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _default_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _release_sigterm()


def _reap(children: dict[int, bytes], sock: socket.socket, detached: bool) -> None:
    """Report every child that exited."""
    while children:
        try:
            pid, status = _wait_next(detached)
        except ChildProcessError:
            return
        if pid == 0:
            return
        child_id = children.pop(pid, None)
        if child_id is not None:
            sock.send(f"exited {child_id.hex()} {status}".encode())


def _wait_next(detached: bool) -> tuple[int, int]:
    """(pid, wait status) of a child that exited, or (0, 0). A detached child led its own process group:
    what is left of the group is killed while the exited child, not reaped yet, still holds its id."""
    waitid = getattr(os, "waitid", None)
    if not detached or waitid is None:
        return os.waitpid(-1, os.WNOHANG)
    info = waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None:
        return 0, 0
    try:
        os.killpg(info.si_pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return os.waitpid(info.si_pid, 0)
