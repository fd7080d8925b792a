"""Running one task inside a processor: resolve the function and arguments, call, package the result.

Every way a task can end becomes one TaskResult: the return value (inline up to 64 KiB, else an
object in storage owned by the task's client), the pickled exception with its traceback text, or a
status naming what went wrong around the call (missing object, result not serializable).
"""

from __future__ import annotations

import collections
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol

import cloudpickle

from scaler.errors import (
    DeserializeObjectError,
    MissingObjects,
    ObjectStorageException,
    TaskExceptionNotSerializableError,
)
from scaler.payload import references
from scaler.payload.serializer import DefaultSerializer, Serializer, deserialize_frames, deserialize_with
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID, TaskID, new_random_object_id

#: Results up to this size travel inside the result message; bigger ones go to object storage.
INLINE_LIMIT_BYTES = 64 * 1024
#: Deserialized objects kept per processor (by serialized size), for objects reused across tasks.
OBJECT_CACHE_BYTES = 1 << 30
MEMORY_SAMPLE_SECONDS = 0.05

_DEFAULT = DefaultSerializer()
_NO_PROFILE = m.Profile()


class StorageAccess(Protocol):
    """What task execution needs from object storage (an ObjectStorageConnection satisfies it)."""

    def get(self, object_id: bytes) -> bytes | bytearray | memoryview: ...
    def get_frames(self, object_id: bytes) -> list[memoryview]: ...
    def put(self, object_id: bytes, payload: Any, owner_id: bytes = b"", name: str = "") -> None: ...
    def exists(self, object_id: bytes) -> bool: ...


class ObjectCache:
    """Deserialized objects by id, least recently used dropped first beyond a byte budget."""

    def __init__(self, budget_bytes: int) -> None:
        self._budget = budget_bytes
        self._used = 0
        self._entries: collections.OrderedDict[tuple[bytes, bytes], tuple[Any, int]] = collections.OrderedDict()

    def get(self, key: tuple[bytes, bytes]) -> tuple[bool, Any]:
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        self._entries.move_to_end(key)
        return True, entry[0]

    def put(self, key: tuple[bytes, bytes], value: Any, size: int) -> None:
        if size > self._budget:
            return
        self._entries[key] = (value, size)
        self._used += size
        while self._used > self._budget:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._used -= dropped


class _TaskFailure(Exception):
    """Ends a task with a status other than success/failed (raised before the user function runs)."""

    def __init__(self, status: m.ResultStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class TaskExecutor:
    def __init__(
        self,
        storage: Callable[[], StorageAccess],
        send_log: Callable[[m.TaskLog], None],
        cpu_seconds: Callable[[], float] = time.process_time,
    ) -> None:
        """`cpu_seconds`: the clock a profiled task's CPU time is read from (a processor whose tasks park leaves
        out what other tasks used meanwhile)."""
        self._storage = storage
        self._send_log = send_log
        self._cpu_seconds = cpu_seconds
        self._functions: dict[bytes, Any] = {}
        self._serializers: dict[bytes, Serializer] = {}
        self._objects = ObjectCache(OBJECT_CACHE_BYTES)

    def run(self, task: m.Task) -> m.TaskResult:
        sampler: _MemorySampler | None = None
        try:
            body = codec.decode_body(task.body)
            serializer = self._serializer(body.serializer_id)
            function = self._function(body.function_id, serializer)
            args, kwargs = self._arguments(body, task, serializer)
        except _TaskFailure as failure:
            return m.TaskResult(task.task_id, failure.status, error_message=str(failure))
        except Exception as error:
            return self._failed(task, error, "".join(traceback.format_exception(error)))
        if body.profiling:
            sampler = _MemorySampler()
        started, cpu_started = time.perf_counter(), self._cpu_seconds()
        try:
            with _OutputCapture(task.task_id, self._send_log, body.stream_output):
                value = function(*args, **kwargs)
        except SystemExit as exit_request:
            replacement = RuntimeError(f"the task called sys.exit({exit_request.code!r})")
            return self._failed(task, replacement, "".join(traceback.format_exception(exit_request)))
        except Exception as error:
            return self._failed(task, error, _user_traceback(error))
        finally:
            profile = _NO_PROFILE
            if sampler is not None:  # only profiled tasks carry (and pay for) measurements
                profile = m.Profile(time.perf_counter() - started, self._cpu_seconds() - cpu_started, sampler.stop())
        return self._succeeded(task, serializer, value, profile)

    # ------------------------------------------------------------ inputs

    def _serializer(self, serializer_id: ObjectID) -> Serializer:
        if not serializer_id:
            return _DEFAULT
        serializer = self._serializers.get(serializer_id)
        if serializer is None:
            payload = self._fetch(serializer_id, "the client's serializer")
            try:
                serializer = pickle.loads(payload)
            except Exception as error:
                raise DeserializeObjectError(f"could not load the client's serializer: {error!r}") from error
            self._serializers[serializer_id] = serializer
        return serializer

    def _function(self, function_id: ObjectID, serializer: Serializer) -> Any:
        key = function_id
        function = self._functions.get(key)
        if function is None:
            payload = self._fetch(function_id, "the task's function")
            try:
                function = deserialize_with(serializer, payload)
            except Exception as error:
                raise DeserializeObjectError(f"could not deserialize the task's function: {error!r}") from error
            self._functions[key] = function
        return function

    def _arguments(self, body: m.TaskBody, task: m.Task, serializer: Serializer) -> tuple[list[Any], dict[str, Any]]:
        inputs = {given.task_id: given for given in task.inputs}
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        references.install_resolver(lambda object_id: self._object(object_id, serializer))
        references.install_node_resolver(
            lambda task_id: self._argument(m.Argument(m.ArgumentKind.TASK_RESULT, task_id), inputs, serializer, -1)
        )
        try:
            for position, argument in enumerate(body.args):
                value = self._argument(argument, inputs, serializer, position)
                if argument.keyword:
                    kwargs[argument.keyword] = value
                else:
                    args.append(value)
        finally:
            references.install_resolver(None)
            references.install_node_resolver(None)
        return args, kwargs

    def _argument(
        self, argument: m.Argument, inputs: dict[TaskID, m.TaskInput], serializer: Serializer, position: int
    ) -> Any:
        kind, data = argument.kind, argument.data
        if kind is m.ArgumentKind.TASK_RESULT:
            given = inputs.get(TaskID(data))
            if given is None:
                raise _TaskFailure(m.ResultStatus.ERROR, f"the result of graph node {data.hex()} was not provided")
            kind = m.ArgumentKind.INLINE if given.kind is m.PayloadKind.INLINE else m.ArgumentKind.OBJECT_ID
            data = given.data
        if kind is m.ArgumentKind.OBJECT_ID:
            return self._object(data, serializer)
        try:
            return deserialize_with(serializer, data)
        except _TaskFailure:
            raise
        except Exception as error:
            name = argument.keyword or f"#{position}"
            raise DeserializeObjectError(f"could not deserialize argument {name}: {error!r}") from error

    def _object(self, object_id: bytes, serializer: Serializer) -> Any:
        """An object argument; a cached copy is used only while the object still exists in storage, so
        a reference made stale by client.clear() fails instead of silently using old data."""
        key = (id(serializer).to_bytes(8, "little"), object_id)
        found, value = self._objects.get(key)
        if found:
            if not self._storage().exists(object_id):
                raise _TaskFailure(
                    m.ResultStatus.MISSING_OBJECT,
                    f"object {object_id.hex()} is not in object storage any more: it was deleted by client.clear() "
                    f"or its client left",
                )
            return value
        frames = self._fetch_frames(ObjectID(object_id), "an object the task needs")
        try:
            value = deserialize_frames(serializer, frames)
        except Exception as error:
            raise DeserializeObjectError(f"could not deserialize object {object_id.hex()}: {error!r}") from error
        self._objects.put(key, value, sum(len(frame) for frame in frames))
        return value

    def _fetch(self, object_id: ObjectID, what: str) -> bytes | bytearray | memoryview:
        frames = self._fetch_frames(object_id, what)
        return frames[0] if len(frames) == 1 else b"".join(frames)

    def _fetch_frames(self, object_id: ObjectID, what: str) -> list[memoryview]:
        try:
            return self._storage().get_frames(object_id)
        except MissingObjects as error:
            raise _TaskFailure(
                m.ResultStatus.MISSING_OBJECT,
                f"{what} (object {object_id.hex()}) is not in object storage: it was deleted by client.clear(), "
                f"its client left, or the object storage server restarted and lost it ({error})",
            ) from None

    # ------------------------------------------------------------ outputs

    def _succeeded(self, task: m.Task, serializer: Serializer, value: Any, profile: m.Profile) -> m.TaskResult:
        try:
            payload = serializer.serialize(value)
        except Exception as error:
            text = f"the task's result of type {type(value).__qualname__} could not be serialized: {error!r}"
            return m.TaskResult(task.task_id, m.ResultStatus.NOT_SERIALIZABLE, error_message=text, profile=profile)
        if len(payload) <= INLINE_LIMIT_BYTES:
            return m.TaskResult(task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, payload, profile=profile)
        object_id = new_random_object_id()
        try:
            self._storage().put(object_id, payload, owner_id=task.client_id, name="result")
        except ObjectStorageException as error:  # the processor lives on; the task fails and says why
            problem = ObjectStorageException(
                f"the task's result ({len(payload):,} bytes, over the {INLINE_LIMIT_BYTES // 1024} KiB inline limit) "
                f"could not be stored in object storage: {error}"
            )
            return self._failed(task, problem, "")
        return m.TaskResult(task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, object_id, profile=profile)

    def _failed(self, task: m.Task, error: BaseException, trace: str) -> m.TaskResult:
        try:
            payload = cloudpickle.dumps((error, trace), protocol=pickle.HIGHEST_PROTOCOL)
            pickle.loads(payload)  # an exception that pickles but cannot unpickle would fail in the client
        except Exception as pickling_error:
            replacement = TaskExceptionNotSerializableError(
                f"the task raised {type(error).__qualname__}: {error} (the exception itself could not be "
                f"pickled: {pickling_error!r})"
            )
            payload = cloudpickle.dumps((replacement, trace), protocol=pickle.HIGHEST_PROTOCOL)
        message = f"{type(error).__qualname__}: {error}"[:1000]
        return m.TaskResult(task.task_id, m.ResultStatus.FAILED, m.PayloadKind.INLINE, payload, message)


def _user_traceback(error: BaseException) -> str:
    """The traceback from the user's function down, without the processor's own frames."""
    tb = error.__traceback__
    if tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


class _MemorySampler:
    """Samples this process's resident memory while a profiled task runs; reports the peak growth."""

    def __init__(self) -> None:
        self._start = _rss_bytes()
        self._peak = self._start
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="scaler-memory-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stopped.wait(MEMORY_SAMPLE_SECONDS):
            self._peak = max(self._peak, _rss_bytes())

    def stop(self) -> int:
        self._stopped.set()
        self._thread.join()
        self._peak = max(self._peak, _rss_bytes())
        return max(0, self._peak - self._start)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _LogStream:
    """A task's stdout or stderr: complete lines go to the client as TaskLog messages (the rest when
    the task ends)."""

    def __init__(self, task_id: TaskID, stream: m.LogStream, send: Callable[[m.TaskLog], None]):
        self._task_id, self._stream, self._send = task_id, stream, send
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            complete, _, self._pending = self._pending.rpartition("\n")
            self._send(m.TaskLog(self._task_id, self._stream, complete + "\n"))
        return len(text)

    def close_task(self) -> None:
        if self._pending:
            self._send(m.TaskLog(self._task_id, self._stream, self._pending))
            self._pending = ""


class _StreamRouter:
    """Stands in for sys.stdout or sys.stderr once a task streams its output: a write from the thread of such
    a task goes to that task's client; any other write (another task's, a thread a task started, the
    processor's own) goes to the original stream."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.by_thread: dict[int, _LogStream] = {}

    def write(self, text: str) -> int:
        stream = self.by_thread.get(threading.get_ident())
        return stream.write(text) if stream is not None else int(self.original.write(text))

    def flush(self) -> None:
        if threading.get_ident() not in self.by_thread:
            self.original.flush()

    def isatty(self) -> bool:
        return threading.get_ident() not in self.by_thread and bool(self.original.isatty())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


def _router(name: str) -> _StreamRouter:
    current = getattr(sys, name)
    if not isinstance(current, _StreamRouter):
        current = _StreamRouter(current)
        setattr(sys, name, current)
    return current


class _OutputCapture:
    """While active, what the task's thread prints goes to its client as TaskLog messages."""

    def __init__(self, task_id: TaskID, send: Callable[[m.TaskLog], None], enabled: bool) -> None:
        self._task_id, self._send, self._enabled = task_id, send, enabled
        self._streams: list[tuple[_StreamRouter, _LogStream]] = []

    def __enter__(self) -> None:
        if self._enabled:
            thread = threading.get_ident()
            for name, kind in (("stdout", m.LogStream.STDOUT), ("stderr", m.LogStream.STDERR)):
                router, stream = _router(name), _LogStream(self._task_id, kind, self._send)
                router.by_thread[thread] = stream
                self._streams.append((router, stream))

    def __exit__(self, *exc: object) -> None:
        thread = threading.get_ident()
        for router, stream in self._streams:
            stream.close_task()
            if router.by_thread.get(thread) is stream:
                del router.by_thread[thread]
        self._streams.clear()
