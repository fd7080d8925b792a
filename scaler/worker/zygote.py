"""A pre-imported, single-threaded child of the worker agent that forks processors on request.

Starting a Python process and importing zmq, capnp and cloudpickle costs a few hundred
milliseconds; forking this zygote costs a few. The zygote is forked by the agent at start-up, before
the agent creates any thread, event loop or ZeroMQ context, so forking it again is safe.

Messages on a Unix SOCK_SEQPACKET pair (one message per send):
  agent -> zygote: "spawn <processor id hex>" with one file descriptor attached (SCM_RIGHTS): the
                   processor's end of its channel to the agent (see processor_channel)
  zygote -> agent: "started <processor id hex> <pid>"
                   "exited <processor id hex> <wait status>"
The zygote dies with the agent (PR_SET_PDEATHSIG) and kills its processors when the agent closes the
socket, so no processor outlives its worker.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from scaler.cluster.child_processes import name_this_process

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError:
            pass


def describe_wait_status(status: int) -> str:
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


class Zygote:
    """The agent's handle on its zygote."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.socket = sock

    @classmethod
    def start(cls, run_processor: Callable[[bytes, socket.socket], int]) -> Zygote:
        """Fork the zygote. `run_processor(processor_id, channel)` runs in each forked processor."""
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the zygote
            parent_end.close()
            code = 1
            try:
                die_with_parent()
                code = _serve(child_end, run_processor)
            finally:
                os._exit(code)
        child_end.close()
        parent_end.setblocking(False)
        return cls(pid, parent_end)

    def spawn(self, processor_id: bytes) -> socket.socket:
        """Ask for a processor; returns the agent's end of its channel."""
        agent_end, processor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.setblocking(True)
        try:
            socket.send_fds(self.socket, [b"spawn " + processor_id.hex().encode()], [processor_end.fileno()])
        finally:
            self.socket.setblocking(False)
            processor_end.close()
        return agent_end

    def read_reports(self) -> list[tuple[str, bytes, int]]:
        """Reports available now: ("started", processor id, pid) or ("exited", processor id, status).
        An empty read means the zygote is gone: ("gone", b"", 0)."""
        reports: list[tuple[str, bytes, int]] = []
        while True:
            try:
                data = self.socket.recv(4096)
            except BlockingIOError:
                return reports
            if not data:
                return [*reports, ("gone", b"", 0)]
            kind, processor_hex, number = data.decode().split()
            reports.append((kind, bytes.fromhex(processor_hex), int(number)))

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass


def _serve(sock: socket.socket, run_processor: Callable[[bytes, socket.socket], int]) -> int:
    """The zygote's loop: fork on request, report starts and exits, stop when the agent goes."""
    # The agent alone decides when the zygote and processors stop (it closes the socket, or dies and the
    # kernel sends SIGKILL): a Ctrl-C to the process group must not kill a running task before the
    # worker has handed it back to the scheduler.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    name_this_process("scaler-zygote")
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
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
            _reap(children, sock)
            if sock in readable:
                data, fds, _, _ = socket.recv_fds(sock, 4096, 1)
                if not data:
                    return 0
                _, processor_hex = data.decode().split()
                channel = socket.socket(fileno=fds[0])
                pid = _fork_processor(sock, wake_read, wake_write, run_processor, bytes.fromhex(processor_hex), channel)
                channel.close()
                children[pid] = bytes.fromhex(processor_hex)
                sock.send(f"started {processor_hex} {pid}".encode())
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fork_processor(
    sock: socket.socket,
    wake_read: int,
    wake_write: int,
    run_processor: Callable[[bytes, socket.socket], int],
    processor_id: bytes,
    channel: socket.socket,
) -> int:
    pid = os.fork()
    if pid != 0:
        return pid
    code = 1
    try:
        sock.close()
        signal.set_wakeup_fd(-1)
        os.close(wake_read)
        os.close(wake_write)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # SIGINT and SIGTERM stay ignored (see _serve)
        die_with_parent()
        name_this_process("scaler-processor")
        code = run_processor(processor_id, channel)
    except BaseException:
        logger.exception("processor crashed")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(children: dict[int, bytes], sock: socket.socket) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        processor_id = children.pop(pid, None)
        if processor_id is not None:
            sock.send(f"exited {processor_id.hex()} {status}".encode())
