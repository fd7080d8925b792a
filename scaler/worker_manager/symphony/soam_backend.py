"""IBM Symphony as an offloading backend: each task of a proxy worker is one task of a SOAM session.

A proxy holds one connection to the Symphony application named by `--service-name` and one PARTIAL_ASYNC
session on it. A task's bundle (payload/remote_bundle.py) is the task input; the deployed service
(`symphony/service.py`) runs it with `run_bundle` and answers its outcome as the task output, which comes
back through the session callback on a Symphony thread and waits in `_finished` for the next `poll`.

- Cancel: Symphony's Python API has no call that stops one task, so a cancelled task runs to completion on
  its service instance and its output is dropped. Closing the session (DESTROY_ON_CLOSE) ends every task
  still in it.
- A lost session (`on_exception`) fails every task in flight on it, naming the session and why; the next
  `submit` opens a new session.
- `soamapi` ships with Symphony, not with scaler: it is imported when a backend is made, never at import.
"""

from __future__ import annotations

import array
import functools
import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from scaler.config.sections import SymphonyWorkerManagerConfig, WorkerManagerSettings
from scaler.worker_manager.offload.backend import JobOutcome, OffloadError, RemoteJob

logger = logging.getLogger(__name__)

SOAMAPI_MISSING = (
    "scaler_worker_manager symphony needs IBM Symphony's Python API (soamapi), which ships with a Symphony "
    "installation: set up the Symphony client environment on this machine (soamapi on PYTHONPATH); soamapi is "
    "not importable"
)
#: the credentials of the connection (the reference's; Symphony's default guest account)
USER_NAME = "Guest"
PASSWORD = "Guest"
SESSION_TYPE = "RecoverableAllHistoricalData"
SESSION_NAME = "ScalerSession"


def load_soamapi() -> ModuleType:
    """The `soamapi` module; OffloadError naming it when it cannot be imported."""
    try:
        return importlib.import_module("soamapi")
    except ImportError as error:
        raise OffloadError(f"{SOAMAPI_MISSING} ({error})") from None


@functools.cache
def payload_message_class(soamapi: ModuleType) -> type[Any]:
    """The message of task inputs and outputs: bytes, written as one byte array (shared with the service)."""

    # soamapi is imported at run time: mypy cannot know this base class
    class PayloadMessage(soamapi.Message):  # type: ignore[misc,name-defined]
        def __init__(self, payload: bytes = b"") -> None:
            super().__init__()
            self.payload = payload

        def on_serialize(self, stream: Any) -> None:
            data = array.array("b", self.payload)
            stream.write_byte_array(data, 0, len(data))

        def on_deserialize(self, stream: Any) -> None:
            self.payload = stream.read_byte_array("b").tobytes()

    return PayloadMessage


@functools.cache
def _callback_class(soamapi: ModuleType) -> type[Any]:
    # soamapi is imported at run time: mypy cannot know this base class
    class SessionCallback(soamapi.SessionCallback):  # type: ignore[misc,name-defined]
        """Hands one session's events to its backend (on Symphony's callback thread)."""

        def __init__(self, on_response: Callable[[Any], None], on_exception: Callable[[Any], None]) -> None:
            super().__init__()
            self._on_response = on_response
            self._on_exception = on_exception

        def on_response(self, task_output_handle: Any) -> None:
            self._on_response(task_output_handle)

        def on_exception(self, exception: Any) -> None:
            self._on_exception(exception)

    return SessionCallback


@dataclass(eq=False)
class _SoamSession:
    handle: Any = None
    session_id: str = "?"
    keys: dict[str, str] = field(default_factory=dict)  #: Symphony task id -> job key, for its tasks in flight
    is_lost: bool = False


class SoamBackend:
    """An `OffloadBackend` (worker_manager/offload/backend.py) over one Symphony connection."""

    name = "IBM Symphony"
    batch_window_seconds = 0.0
    poll_interval_seconds = 0.05

    def __init__(self, soamapi: ModuleType, application_name: str) -> None:
        self._soamapi = soamapi
        self._application_name = application_name
        self._message_class = payload_message_class(soamapi)
        self._lock = threading.Lock()  #: guards everything below (submit, poll, cancel and callbacks meet here)
        self._session: _SoamSession | None = None  #: where new tasks go; opened by the first submit
        self._lost: list[_SoamSession] = []  #: lost sessions still to close (never closed on a callback thread)
        self._in_flight: dict[str, _SoamSession] = {}  #: job key -> its session; agrees with the sessions' `keys`
        self._finished: dict[str, JobOutcome] = {}  #: outcomes not polled yet
        self._cancelled: set[str] = set()  #: keys in flight whose output is dropped
        self._is_closed = False
        try:
            soamapi.initialize()
            security = soamapi.DefaultSecurityCallback(USER_NAME, PASSWORD)
            self._connection = soamapi.connect(application_name, security)
        except Exception as error:
            _quietly("uninitialize the Symphony API", soamapi.uninitialize)
            raise OffloadError(
                f"could not connect to the IBM Symphony application {application_name!r} (--service-name): {error}"
            ) from None
        logger.debug(
            "connected to IBM Symphony application %r (connection %s)", application_name, self._connection.get_id()
        )

    # ------------------------------------------------------------ the OffloadBackend verbs

    def submit(self, jobs: list[RemoteJob]) -> None:
        with self._lock:
            if self._is_closed:
                raise OffloadError("the IBM Symphony connection is closed")
            session = self._open_session()
            for job in jobs:
                attributes = self._soamapi.TaskSubmissionAttributes()
                attributes.set_task_input(self._message_class(job.bundle))
                try:
                    task = session.handle.send_task_input(attributes)
                except Exception as error:
                    self._lose(session, f"it refused a task: {error}")
                    raise OffloadError(f"IBM Symphony session {session.session_id} refused a task: {error}") from None
                session.keys[str(task.get_id())] = job.key  # under the lock: before its response is handled
                self._in_flight[job.key] = session
        self._close_lost()

    def poll(self) -> list[JobOutcome]:
        self._close_lost()
        with self._lock:
            outcomes = list(self._finished.values())
            self._finished.clear()
        return outcomes

    def cancel(self, key: str, reason: str) -> None:
        with self._lock:
            self._finished.pop(key, None)
            session = self._in_flight.get(key)
            if session is None:
                return
            self._cancelled.add(key)
        logger.info(
            "job %s cancelled (%s): IBM Symphony cannot stop one task, so it runs to completion in session %s and "
            "its output is dropped", key, reason, session.session_id,
        )  # fmt: skip

    def close(self) -> None:
        with self._lock:
            if self._is_closed:
                return
            self._is_closed = True
            sessions = [*self._lost, *([self._session] if self._session is not None else [])]
            self._session, self._lost = None, []
            self._in_flight.clear()
            self._cancelled.clear()
        destroy = self._soamapi.SessionCloseFlags.DESTROY_ON_CLOSE
        for session in sessions:  # destroying a session ends the tasks still in it
            _quietly(f"close session {session.session_id}", functools.partial(session.handle.close, destroy))
        _quietly("close the connection", self._connection.close)
        _quietly("uninitialize the Symphony API", self._soamapi.uninitialize)

    def cancel_orphans(self, key_prefix: str) -> int:
        return 0  # a dead proxy's connection goes with it, and Symphony ends its session

    # ------------------------------------------------------------ sessions

    def _open_session(self) -> _SoamSession:
        """The session for new tasks (called under the lock): the current one, or a new one."""
        if self._session is not None and not self._session.is_lost:
            return self._session
        session = _SoamSession()
        attributes = self._soamapi.SessionCreationAttributes()
        attributes.set_session_type(SESSION_TYPE)
        attributes.set_session_name(SESSION_NAME)
        attributes.set_session_flags(self._soamapi.SessionFlags.PARTIAL_ASYNC)
        callback = _callback_class(self._soamapi)(
            functools.partial(self._on_response, session), functools.partial(self._on_exception, session)
        )
        attributes.set_session_callback(callback)
        try:
            session.handle = self._connection.create_session(attributes)
        except Exception as error:
            raise OffloadError(
                f"could not open a session of IBM Symphony application {self._application_name!r}: {error}"
            ) from None
        session.session_id = str(session.handle.get_id())
        replaced = self._session
        self._session = session
        if replaced is None:
            logger.info("opened IBM Symphony session %s", session.session_id)
        else:
            logger.warning(
                "opened IBM Symphony session %s (session %s was lost)", session.session_id, replaced.session_id
            )
        return session

    def _lose(self, session: _SoamSession, why: str) -> None:
        """Fail the tasks in flight on a session that is gone (under the lock); the next submit opens another."""
        if session.is_lost:
            return
        session.is_lost = True
        self._lost.append(session)
        logger.warning(
            "IBM Symphony session %s was lost (%s): %d task(s) in flight fail",
            session.session_id,
            why,
            len(session.keys),
        )
        for task_id, key in session.keys.items():
            self._in_flight.pop(key, None)
            if key in self._cancelled:
                self._cancelled.discard(key)
                continue
            failure = (
                f"the IBM Symphony session {session.session_id} was lost while its task {task_id} ran ({why}); the "
                f"next tasks go to a new session"
            )
            self._finished[key] = JobOutcome(key, None, failure)
        session.keys.clear()

    def _close_lost(self) -> None:
        with self._lock:
            lost, self._lost = self._lost, []
        destroy = self._soamapi.SessionCloseFlags.DESTROY_ON_CLOSE
        for session in lost:
            _quietly(f"close lost session {session.session_id}", functools.partial(session.handle.close, destroy))

    # ------------------------------------------------------------ callbacks (on a Symphony thread)

    def _on_response(self, session: _SoamSession, handle: Any) -> None:
        task_id = "?"
        try:
            task_id = str(handle.get_id())
            if handle.is_successful():
                message = self._message_class()
                handle.populate_task_output(message)
                outcome, failure = message.payload, ""
            else:
                outcome, failure = None, f"IBM Symphony task {task_id} failed: {_failure_text(handle)}"
        except Exception as error:
            outcome, failure = None, f"the output of IBM Symphony task {task_id} could not be read: {error!r}"
        with self._lock:
            key = session.keys.pop(task_id, None)
            if key is None:
                return  # its session was lost or closed: reported already
            self._in_flight.pop(key, None)
            if key in self._cancelled:
                self._cancelled.discard(key)
                return
            self._finished[key] = JobOutcome(key, outcome, failure)

    def _on_exception(self, session: _SoamSession, exception: Any) -> None:
        with self._lock:
            self._lose(session, str(exception) or type(exception).__name__)


def _failure_text(handle: Any) -> str:
    """What Symphony says about a failed task: the exception the service raised when it embeds one."""
    exception = handle.get_exception()
    if exception is None:
        return "no reason given"
    embedded = exception.get_embedded_exception()
    return str(embedded if embedded is not None else exception).strip() or type(exception).__name__


def _quietly(what: str, call: Callable[[], object]) -> None:
    """Closing steps: each is tried even when an earlier one failed; a failure is logged, never raised."""
    try:
        call()
    except Exception as error:
        logger.warning("could not %s: %s", what, error)


def make_backend(settings: WorkerManagerSettings) -> SoamBackend:
    """The symphony row's offload backend (scaler/config/manager_types.py): a backend connected to the
    application `--service-name` names."""
    assert isinstance(settings, SymphonyWorkerManagerConfig)
    if not settings.service_name:
        raise OffloadError("scaler_worker_manager symphony needs --service-name (the Symphony application to use)")
    return SoamBackend(load_soamapi(), settings.service_name)
