"""The middleware behind the fake `soamapi` (soamapi.py next to it): a session's tasks and the service instance
processes that run them. Knows nothing of the API's classes: tasks are bytes in, (output, failure) out.

A `SessionManager` owns one thread. Tasks wait in a queue; the thread starts service instances (the
application's command, with its end of a socket pair) while tasks wait and fewer than `max_instances` run,
hands each ready, idle instance one task, and reports every output with `on_output(task_id, output, failure)`
from that thread, never holding its lock (a callback may wait for a lock its caller holds while submitting).
An instance that dies fails its task; three that die in a row before they are ready abort the session. An
abort kills the instances, then calls `on_abort(message)`; a close lets them exit (they see their end of the
pair closed) and kills the ones that linger.

The instance side is `serve_instance`: one reader thread puts tasks in a queue; when the session goes away the
instance ends, at once if it runs a task (the real middleware kills it).
"""

from __future__ import annotations

import os
import pickle
import queue
import selectors
import socket
import struct
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

CONTROL_DIR_VARIABLE = "FAKE_SOAMAPI_CONTROL_DIR"
SOCKET_VARIABLE = "FAKE_SOAMAPI_SERVICE_FD"  # given to a service instance: its end of the socket pair
SESSION_ID_VARIABLE = "FAKE_SOAMAPI_SESSION_ID"
START_FAILURES_ABORTING = 3
TICK_SECONDS = 0.05
STOP_GRACE_SECONDS = 3.0


class SessionEnded(Exception):
    """Submitting to a session that is closed or aborted."""


class _Instance:
    """A service instance process and the session's end of its socket pair."""

    def __init__(self, popen: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.popen = popen
        self.sock = sock
        self.is_ready = False
        self.task_id: str | None = None


class SessionManager:
    def __init__(
        self,
        session_id: str,
        service_command: list[str],
        max_instances: int,
        on_output: Callable[[str, bytes | None, str], None],
        on_abort: Callable[[str], None],
    ) -> None:
        self.session_id = session_id
        self._service_command = service_command
        self._max_instances = max_instances
        self._on_output = on_output
        self._on_abort = on_abort
        self._lock = threading.Lock()
        self._task_numbers = 0  #: (under lock)
        self._pending: deque[tuple[str, bytes]] = deque()  #: tasks not yet on an instance (under lock)
        self._ending: str | None = None  #: "closed" or "aborted: <why>" (under lock)
        self._kill_requested = False  #: (under lock)
        # the thread's own state
        self._instances: list[_Instance] = []
        self._outputs: list[tuple[str, bytes | None, str]] = []
        self._start_failures = 0
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._thread = threading.Thread(target=self._serve, name=f"soamapi-session-{session_id}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ from any thread

    def submit(self, task_input: bytes) -> str:
        with self._lock:
            if self._ending is not None:
                raise SessionEnded(self._ending.partition(":")[0])
            self._task_numbers += 1
            task_id = str(self._task_numbers)
            self._pending.append((task_id, task_input))
        self._wake()
        return task_id

    def close(self) -> None:
        self._end("closed")
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def abort(self, why: str) -> None:
        self._end(f"aborted: {why}")

    def kill_instances(self) -> None:
        with self._lock:
            self._kill_requested = True
        self._wake()

    def _end(self, how: str) -> None:
        with self._lock:
            if self._ending is None:
                self._ending = how
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass  # already woken (buffer full) or the thread is gone

    # ------------------------------------------------------------ the session's thread

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_reader, selectors.EVENT_READ, None)
        ending: str | None = None
        try:
            while ending is None:
                for key, _events in selector.select(TICK_SECONDS):
                    if key.data is None:
                        self._drain_wake()
                    else:
                        self._receive(key.data, selector)
                self._take_control_files()
                with self._lock:
                    ending, kill, self._kill_requested = self._ending, self._kill_requested, False
                if ending is None:
                    if kill:
                        for instance in self._instances:
                            instance.popen.kill()  # its end of the pair closes: seen as an exit next round
                    self._dispatch(selector)
                    self._deliver()
        finally:
            self._stop_instances(force=ending != "closed")
            selector.close()
            self._wake_reader.close()
            self._wake_writer.close()
        if ending is not None and ending.startswith("aborted: "):
            _call(self._on_abort, ending.partition(": ")[2])

    def _drain_wake(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except OSError:
            pass

    def _receive(self, instance: _Instance, selector: selectors.BaseSelector) -> None:
        try:
            frame = receive_frame(instance.sock)
        except (OSError, EOFError):
            self._instance_gone(instance, selector)
            return
        if frame[0] == "ready":
            instance.is_ready = True
            self._start_failures = 0
        elif frame[0] == "output":
            _, task_id, output, failure = frame
            instance.task_id = None
            self._outputs.append((task_id, output, failure))

    def _instance_gone(self, instance: _Instance, selector: selectors.BaseSelector) -> None:
        selector.unregister(instance.sock)
        instance.sock.close()
        self._instances.remove(instance)
        status = _exit_status(instance.popen)
        if instance.task_id is not None:
            failure = (
                f"the service instance (pid {instance.popen.pid}) running task {instance.task_id} of session "
                f"{self.session_id} exited unexpectedly ({status})"
            )
            self._outputs.append((instance.task_id, None, failure))
        elif not instance.is_ready:
            self._start_failures += 1
            if self._start_failures >= START_FAILURES_ABORTING:
                self.abort(
                    f"{self._start_failures} service instances in a row exited before they were ready (last: "
                    f"{status}); check the service's start command {self._service_command}"
                )

    def _dispatch(self, selector: selectors.BaseSelector) -> None:
        idle = [instance for instance in self._instances if instance.is_ready and instance.task_id is None]
        while idle:
            with self._lock:
                if not self._pending:
                    break
                task_id, task_input = self._pending.popleft()
            instance = idle.pop()
            try:
                send_frame(instance.sock, ("invoke", task_id, task_input))
            except OSError:
                with self._lock:
                    self._pending.appendleft((task_id, task_input))
                continue  # the instance is gone: its end of the pair reads as closed next round
            instance.task_id = task_id
        with self._lock:
            waiting = len(self._pending)
        starting = sum(1 for instance in self._instances if not instance.is_ready)
        for _ in range(min(waiting - starting, self._max_instances - len(self._instances))):
            self._start_instance(selector)

    def _start_instance(self, selector: selectors.BaseSelector) -> None:
        ours, theirs = socket.socketpair()
        environment = {**os.environ, SOCKET_VARIABLE: str(theirs.fileno()), SESSION_ID_VARIABLE: self.session_id}
        try:
            popen = subprocess.Popen(
                self._service_command, env=environment, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL
            )
        except OSError as error:
            ours.close()
            self.abort(f"its service could not be started ({self._service_command}: {error})")
            return
        finally:
            theirs.close()
        instance = _Instance(popen, ours)
        self._instances.append(instance)
        selector.register(ours, selectors.EVENT_READ, instance)

    def _deliver(self) -> None:
        outputs, self._outputs = self._outputs, []
        for output in outputs:
            with self._lock:
                if self._ending is not None:
                    return
            _call(self._on_output, *output)

    def _take_control_files(self) -> None:
        folder = os.environ.get(CONTROL_DIR_VARIABLE)
        if not folder:
            return
        if _take_file(os.path.join(folder, "drop_session")):
            self.abort("the middleware dropped it (fake Symphony: a test's order)")
        if _take_file(os.path.join(folder, "kill_service_instances")):
            self.kill_instances()

    def _stop_instances(self, force: bool) -> None:
        for instance in self._instances:
            if force:
                instance.popen.kill()
            instance.sock.close()  # an instance sees its session gone and exits
        for instance in self._instances:
            try:
                instance.popen.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                instance.popen.kill()
                instance.popen.wait()
        self._instances.clear()


def _call(function: Callable[..., None], *arguments: Any) -> None:
    try:
        function(*arguments)
    except Exception:
        print("soamapi (fake): a session callback raised:", file=sys.stderr)
        traceback.print_exc()


def _take_file(path: str) -> bool:
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True


def _exit_status(popen: subprocess.Popen[bytes]) -> str:
    try:
        code = popen.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        popen.kill()
        code = popen.wait()
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


# ---------------------------------------------------------------- the instance side


def instance_socket() -> tuple[socket.socket, str] | None:
    """This service instance's end of the pair and its session id; None when the middleware did not start it."""
    descriptor = os.environ.get(SOCKET_VARIABLE)
    if descriptor is None:
        return None
    return socket.socket(fileno=int(descriptor)), os.environ.get(SESSION_ID_VARIABLE, "")


def serve_instance(sock: socket.socket, invoke: Callable[[str, bytes], tuple[bytes | None, str]]) -> None:
    """Announce the instance ready, then run tasks with `invoke(task_id, input) -> (output, failure)` until
    the session lets the instance go."""
    inbox: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
    running = threading.Event()
    threading.Thread(target=_read_session, args=(sock, inbox, running), daemon=True).start()
    send_frame(sock, ("ready",))
    while (frame := inbox.get()) is not None:
        _, task_id, task_input = frame
        running.set()
        try:
            output, failure = invoke(task_id, task_input)
        finally:
            running.clear()
        try:
            send_frame(sock, ("output", task_id, output, failure))
        except OSError:
            break
    sock.close()


def _read_session(sock: socket.socket, inbox: queue.Queue[tuple[Any, ...] | None], running: threading.Event) -> None:
    try:
        while True:
            inbox.put(receive_frame(sock))
    except (OSError, EOFError):
        if running.is_set():
            os._exit(0)
        inbox.put(None)


# ---------------------------------------------------------------- frames on a socket pair


def send_frame(sock: socket.socket, frame: tuple[Any, ...]) -> None:
    data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("!Q", len(data)) + data)


def receive_frame(sock: socket.socket) -> tuple[Any, ...]:
    (size,) = struct.unpack("!Q", _receive_exactly(sock, 8))
    frame = pickle.loads(_receive_exactly(sock, size))
    assert isinstance(frame, tuple)
    return frame


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    parts: list[bytes] = []
    remaining = size
    while remaining:
        part = sock.recv(min(remaining, 1 << 20))
        if not part:
            raise EOFError("the other side closed the connection")
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)
