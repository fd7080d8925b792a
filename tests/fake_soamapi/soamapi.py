"""A fake of IBM Symphony's Python API, `soamapi`, for tests and rehearsals (not IBM code).

With this folder on PYTHONPATH, `import soamapi` gets this module. Its public names and call shapes are those
of the real API as scaler uses it. Client side: `initialize`, `connect(application, DefaultSecurityCallback(user,
password))`, `Connection.create_session(SessionCreationAttributes)` (a PARTIAL_ASYNC session with a
`SessionCallback`), `Session.send_task_input(TaskSubmissionAttributes)`, `Session.close(SessionCloseFlags...)`,
`Connection.close`, `uninitialize`; outputs come to `SessionCallback.on_response(TaskOutputHandle)` on the
session's own thread, a lost session to `on_exception(SoamException)`. Service side: a `ServiceContainer`
subclass whose `run()` serves the tasks of one session (`on_invoke(task_context)` with
`populate_task_input` / `set_task_output`). Messages subclass `Message` and write themselves with
`stream.write_byte_array(array, offset, length)` / `stream.read_byte_array(typecode)`.

What it fakes is the middleware (in `_fake_symphony.py` next to it), with real processes:

- the application profile: FAKE_SOAMAPI_APPLICATIONS holds JSON `{"<application>": [argv...]}`, the command
  that starts a service instance of the application (for scaler: `python -m scaler.worker_manager.symphony.
  service`); connecting to an application that is not there fails as for an unregistered application;
- a session starts service instances on demand, up to FAKE_SOAMAPI_SERVICE_INSTANCES (default 4) local
  processes; each runs its module's `ServiceContainer.run()`, which talks to the session over a socket pair
  (no port); an instance runs one task at a time;
- a service instance that dies while running a task fails that task (no rerun, as with taskRetryLimit 0);
  three instances in a row that die before they are ready abort the session;
- closing a session (or its connection, or `uninitialize`) stops its service instances; an instance whose
  session went away (its client process died) exits, a task it runs included.

TEST HOOKS (not part of the real API): `fake_drop_session()` aborts every open session of this process
(`on_exception`, its service instances killed); `fake_kill_service_instances()` kills their service
instances (their tasks fail). A session in another process takes the same orders as files named
`drop_session` / `kill_service_instances` created in the folder FAKE_SOAMAPI_CONTROL_DIR (the first session
to see a file consumes it).
"""

from __future__ import annotations

import array
import itertools
import json
import os
import struct
import threading
import traceback
from typing import Any

import _fake_symphony  # this folder is on the path: it is where this module was found

APPLICATIONS_VARIABLE = "FAKE_SOAMAPI_APPLICATIONS"
INSTANCES_VARIABLE = "FAKE_SOAMAPI_SERVICE_INSTANCES"

_registry_lock = threading.Lock()
_is_initialized = False
_connections: list[Connection] = []
_connection_ids = itertools.count(1)
_session_ids = itertools.count(1)


# ---------------------------------------------------------------- errors, flags, security


class SoamException(Exception):
    """What the API raises, what `on_exception` receives, and what a failed task reports."""

    def __init__(self, message: str = "", embedded: BaseException | None = None) -> None:
        super().__init__(message)
        self._embedded = embedded

    def get_embedded_exception(self) -> BaseException | None:
        return self._embedded


class SessionFlags:
    PARTIAL_ASYNC = 4


class SessionCloseFlags:
    DESTROY_ON_CLOSE = 1


class DefaultSecurityCallback:
    def __init__(self, user_name: str, password: str) -> None:
        self._user_name = user_name
        self._password = password


# ---------------------------------------------------------------- messages and their streams


class Message:
    """Base of user messages: subclasses implement on_serialize(stream) and on_deserialize(stream)."""

    def __init__(self) -> None:
        pass

    def on_serialize(self, stream: Any) -> None:
        raise NotImplementedError

    def on_deserialize(self, stream: Any) -> None:
        raise NotImplementedError


class _OutputStream:
    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write_byte_array(self, values: array.array[int], offset: int, length: int) -> None:
        chunk = values[offset : offset + length]
        self._parts.append(struct.pack("!Q", len(chunk)) + chunk.tobytes())

    def value(self) -> bytes:
        return b"".join(self._parts)


class _InputStream:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def read_byte_array(self, typecode: str) -> array.array[Any]:
        (count,) = struct.unpack_from("!Q", self._data, self._position)
        start = self._position + 8
        end = start + count * array.array(typecode).itemsize
        if end > len(self._data):
            raise SoamException("read_byte_array: the message is shorter than the array it announces")
        self._position = end
        return array.array(typecode, self._data[start:end])


def _serialize(message: Message) -> bytes:
    stream = _OutputStream()
    message.on_serialize(stream)
    return stream.value()


def _deserialize(message: Message, data: bytes) -> None:
    message.on_deserialize(_InputStream(data))


# ---------------------------------------------------------------- client side


class SessionCreationAttributes:
    def __init__(self) -> None:
        self._session_type = ""
        self._session_name = ""
        self._session_flags = 0
        self._session_callback: SessionCallback | None = None

    def set_session_type(self, session_type: str) -> None:
        self._session_type = session_type

    def set_session_name(self, session_name: str) -> None:
        self._session_name = session_name

    def set_session_flags(self, flags: int) -> None:
        self._session_flags = flags

    def set_session_callback(self, callback: SessionCallback) -> None:
        self._session_callback = callback


class TaskSubmissionAttributes:
    def __init__(self) -> None:
        self._task_input: Message | None = None

    def set_task_input(self, message: Message) -> None:
        self._task_input = message


class SessionCallback:
    """Base of session callbacks; called on the session's thread, never on the caller's."""

    def __init__(self) -> None:
        pass

    def on_response(self, task_output_handle: TaskOutputHandle) -> None:
        pass

    def on_exception(self, exception: SoamException) -> None:
        pass


class TaskInputHandle:
    def __init__(self, task_id: str) -> None:
        self._task_id = task_id

    def get_id(self) -> str:
        return self._task_id


class TaskOutputHandle:
    def __init__(self, task_id: str, output: bytes | None, failure: str) -> None:
        self._task_id = task_id
        self._output = output
        self._failure = failure

    def get_id(self) -> str:
        return self._task_id

    def is_successful(self) -> bool:
        return not self._failure

    def populate_task_output(self, message: Message) -> None:
        if self._failure:
            raise SoamException(f"task {self._task_id} failed: it has no output")
        _deserialize(message, self._output or b"")

    def get_exception(self) -> SoamException | None:
        if not self._failure:
            return None
        return SoamException(f"task {self._task_id} failed", embedded=SoamException(self._failure))


def initialize() -> None:
    global _is_initialized
    with _registry_lock:
        _is_initialized = True


def uninitialize() -> None:
    """Closes what is still open, as the middleware's clean-up would."""
    global _is_initialized
    with _registry_lock:
        _is_initialized = False
        connections = list(_connections)
    for connection in connections:
        connection.close()


def connect(application_name: str, security_callback: DefaultSecurityCallback) -> Connection:
    with _registry_lock:
        if not _is_initialized:
            raise SoamException("connect(): the API is not initialized (call soamapi.initialize() first)")
    try:
        applications = json.loads(os.environ.get(APPLICATIONS_VARIABLE) or "{}")
    except ValueError as error:
        raise SoamException(f"the application profiles ({APPLICATIONS_VARIABLE}) are not JSON: {error}") from None
    command = applications.get(application_name)
    if not command:
        raise SoamException(
            f"application {application_name!r} is not registered (fake Symphony: add it to {APPLICATIONS_VARIABLE}, "
            f'e.g. {{"{application_name}": ["python", "-m", "my.service"]}})'
        )
    connection = Connection(application_name, [str(part) for part in command])
    with _registry_lock:
        _connections.append(connection)
    return connection


class Connection:
    def __init__(self, application_name: str, service_command: list[str]) -> None:
        self._id = str(next(_connection_ids))
        self._application_name = application_name
        self._service_command = service_command
        self._sessions: list[Session] = []
        self._is_closed = False

    def get_id(self) -> str:
        return self._id

    def create_session(self, attributes: SessionCreationAttributes) -> Session:
        if self._is_closed:
            raise SoamException(f"connection {self._id} is closed")
        if attributes._session_flags != SessionFlags.PARTIAL_ASYNC or attributes._session_callback is None:
            raise SoamException("this fake serves PARTIAL_ASYNC sessions with a session callback only")
        session = Session(self._application_name, self._service_command, attributes._session_callback)
        self._sessions.append(session)
        return session

    def close(self) -> None:
        self._is_closed = True
        for session in self._sessions:
            session.close(SessionCloseFlags.DESTROY_ON_CLOSE)
        with _registry_lock:
            if self in _connections:
                _connections.remove(self)


# ---------------------------------------------------------------- the session (its middleware: _fake_symphony.py)


class Session:
    def __init__(self, application_name: str, service_command: list[str], callback: SessionCallback) -> None:
        self._id = str(next(_session_ids))
        self._application_name = application_name
        self._callback = callback
        self._manager = _fake_symphony.SessionManager(
            self._id,
            service_command,
            max(1, int(os.environ.get(INSTANCES_VARIABLE) or 4)),
            self._on_output,
            self._on_abort,
        )

    def get_id(self) -> str:
        return self._id

    def send_task_input(self, attributes: TaskSubmissionAttributes) -> TaskInputHandle:
        if attributes._task_input is None:
            raise SoamException("send_task_input(): the attributes have no task input")
        try:
            return TaskInputHandle(self._manager.submit(_serialize(attributes._task_input)))
        except _fake_symphony.SessionEnded as ended:
            raise SoamException(f"session {self._id} is {ended}") from None

    def close(self, flags: int = SessionCloseFlags.DESTROY_ON_CLOSE) -> None:
        self._manager.close()

    def _on_output(self, task_id: str, output: bytes | None, failure: str) -> None:
        self._callback.on_response(TaskOutputHandle(task_id, output, failure))

    def _on_abort(self, why: str) -> None:
        self._callback.on_exception(
            SoamException(f"session {self._id} of application {self._application_name!r} was aborted: {why}")
        )


# ---------------------------------------------------------------- service side


class ServiceContext:
    pass


class SessionContext:
    def __init__(self, session_id: str) -> None:
        self._session_id = session_id


class TaskContext:
    def __init__(self, task_id: str, task_input: bytes) -> None:
        self._task_id = task_id
        self._input = task_input
        self._output: bytes | None = None

    def populate_task_input(self, message: Message) -> None:
        _deserialize(message, self._input)

    def set_task_output(self, message: Message) -> None:
        self._output = _serialize(message)


class ServiceContainer:
    """Base of services: `on_invoke` is required, the other handlers are optional; `run()` serves until the
    session lets the instance go."""

    def on_create_service(self, service_context: ServiceContext) -> None:
        pass

    def on_session_enter(self, session_context: SessionContext) -> None:
        pass

    def on_invoke(self, task_context: TaskContext) -> None:
        raise NotImplementedError("a service implements on_invoke")

    def on_session_leave(self) -> None:
        pass

    def on_destroy_service(self) -> None:
        pass

    def run(self) -> None:
        channel = _fake_symphony.instance_socket()
        if channel is None:
            raise SoamException("ServiceContainer.run(): this process was not started by Symphony as a service")
        sock, session_id = channel
        self.on_create_service(ServiceContext())
        self.on_session_enter(SessionContext(session_id))
        _fake_symphony.serve_instance(sock, self._invoke)
        self.on_session_leave()
        self.on_destroy_service()

    def _invoke(self, task_id: str, task_input: bytes) -> tuple[bytes | None, str]:
        context = TaskContext(task_id, task_input)
        try:
            self.on_invoke(context)
        except Exception:
            return None, traceback.format_exc()
        return context._output, ""


# ---------------------------------------------------------------- TEST HOOKS (not part of the real API)


def _open_sessions() -> list[Session]:
    with _registry_lock:
        return [session for connection in _connections for session in connection._sessions]


def fake_drop_session() -> None:
    """TEST HOOK: abort every open session of this process (its callback's on_exception is called)."""
    for session in _open_sessions():
        session._manager.abort("the middleware dropped it (fake Symphony: a test's order)")


def fake_kill_service_instances() -> None:
    """TEST HOOK: kill the service instances of every open session of this process (their tasks fail)."""
    for session in _open_sessions():
        session._manager.kill_instances()
