"""A task made self-contained for a remote system, and its outcome brought back: the bundle format.

An offloading proxy (`worker_manager/offload/executor.py`) runs tasks where there is no object storage: an AWS Batch
container, a Symphony service instance. So the proxy packs a task with every object it needs (the client's
serializer, the function, object arguments, graph inputs) into one *bundle*; the remote side opens it into the
task and an in-memory storage holding those objects, runs it with the very `TaskExecutor` a local processor uses
(`scaler.worker.task_execution.run_bundle`), and seals an *outcome*: the TaskResult, the objects the execution
stored (a result over the inline limit) and the task's streamed output. Back at the proxy the objects go to
object storage and the result to the scheduler, so a remote task ends exactly as a local one would: same
exceptions, tracebacks and statuses.

Both sides need the same Python version, the same scaler version and the modules the function imports (as for
any worker). Objects referenced from inside arguments (an ObjectReference in a list) are not bundled: such a
task fails with MissingObjects naming the object.

    bundle = pack_task(task, storage)               # proxy, in a thread (reads object storage)
    task, storage = open_bundle(bundle)             # remote side, then run the task against storage ...
    outcome = seal_outcome(result, storage, logs)   # ... and seal what it produced
    result, objects, logs = open_outcome(outcome)   # proxy
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

from scaler.errors import MissingObjects
from scaler.payload.storage import StorageAccess
from scaler.protocol import codec
from scaler.protocol import messages as m

#: Bumped when the bundle or outcome layout changes: a runner refuses bundles it does not understand. A bundle carries
#: each object as the frames it was stored in (joined, a large `bytes` object, a marker frame then its bytes, could
#: not be read back), and an outcome each object the execution stored as its frames too (a result pickled with
#: out-of-band buffers is several frames).
BUNDLE_FORMAT = 3


class BundleError(Exception):
    """A bundle or an outcome that cannot be read (corrupt, truncated, another format)."""


@dataclass(frozen=True, slots=True)
class TaskBundle:
    format: int
    task: bytes  #: the codec-encoded Task
    objects: dict[bytes, tuple[bytes, ...]]  #: object id -> its frames, for every object the task reads


@dataclass(slots=True)
class TaskOutcome:
    format: int
    result: bytes  #: the codec-encoded TaskResult
    #: id -> the object's frames, owner, name
    objects: dict[bytes, tuple[tuple[bytes, ...], bytes, str]] = field(default_factory=dict)
    logs: list[bytes] = field(default_factory=list)  #: codec-encoded TaskLog messages, in order


def object_ids_of(task: m.Task) -> list[bytes]:
    """Every object a task reads directly: serializer, function, object arguments, graph inputs in storage."""
    body = codec.decode_body(task.body)
    ids: list[bytes] = [body.serializer_id] if body.serializer_id else []
    ids.append(body.function_id)
    ids.extend(argument.data for argument in body.args if argument.kind is m.ArgumentKind.OBJECT_ID)
    ids.extend(given.data for given in task.inputs if given.kind is m.PayloadKind.OBJECT_ID)
    return list(dict.fromkeys(ids))


def pack_task(task: m.Task, storage: StorageAccess) -> bytes:
    """The bundle of `task`; raises MissingObjects (from storage) when an object it needs is gone."""
    objects = {
        object_id: tuple(bytes(frame) for frame in storage.get_frames(object_id)) for object_id in object_ids_of(task)
    }
    bundle = TaskBundle(BUNDLE_FORMAT, codec.encode(task), objects)
    return pickle.dumps(bundle, protocol=pickle.HIGHEST_PROTOCOL)


class BundleStorage:
    """The storage a remote execution sees: the bundled objects, and what it stores is kept for the outcome."""

    def __init__(self, objects: dict[bytes, tuple[bytes, ...]]) -> None:
        self._objects = objects
        self.stored: dict[bytes, tuple[tuple[bytes, ...], bytes, str]] = {}

    def get(self, object_id: bytes) -> bytes:
        frames = self._frames_of(object_id)
        return frames[0] if len(frames) == 1 else b"".join(frames)

    def get_frames(self, object_id: bytes, copy_on_write: bool = False) -> list[memoryview]:
        """Views of the shipped frames (read-only); `copy_on_write`: writable copies."""
        if copy_on_write:
            return [memoryview(bytearray(frame)) for frame in self._frames_of(object_id)]
        return [memoryview(frame) for frame in self._frames_of(object_id)]

    def _frames_of(self, object_id: bytes) -> tuple[bytes, ...]:
        try:
            return self._objects[object_id]
        except KeyError:
            raise MissingObjects(
                f"object {object_id.hex()} was not shipped with the offloaded task (only its function, its direct "
                f"arguments and its graph inputs travel)"
            ) from None

    def put(self, object_id: bytes, payload: Any, owner_id: bytes = b"", name: str = "") -> None:
        self.stored[object_id] = (tuple(bytes(part) for part in _frames(payload)), owner_id, name)

    def exists(self, object_id: bytes) -> bool:
        return object_id in self._objects


def _frames(payload: Any) -> list[Any]:
    return list(payload) if isinstance(payload, (list, tuple)) else [payload]


def open_bundle(bundle_bytes: bytes) -> tuple[m.Task, BundleStorage]:
    """The bundled task and a storage holding its objects; BundleError for a bundle that cannot be read."""
    bundle = _load(bundle_bytes, TaskBundle, "task bundle")
    task = codec.decode(bundle.task)
    if not isinstance(task, m.Task):
        raise BundleError(f"the bundle holds a {type(task).__name__}, not a Task")
    return task, BundleStorage(bundle.objects)


def seal_outcome(result: m.TaskResult, storage: BundleStorage, logs: list[m.TaskLog]) -> bytes:
    """The outcome of a remote execution: its result, what it stored and what it printed, in order."""
    outcome = TaskOutcome(BUNDLE_FORMAT, codec.encode(result), storage.stored, [codec.encode(log) for log in logs])
    return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)


def open_outcome(
    outcome_bytes: bytes,
) -> tuple[m.TaskResult, dict[bytes, tuple[tuple[bytes, ...], bytes, str]], list[m.TaskLog]]:
    """The result, the stored objects and the logs of a remote execution; BundleError when unreadable."""
    outcome = _load(outcome_bytes, TaskOutcome, "task outcome")
    try:
        result = codec.decode(outcome.result)
        logs = [codec.decode(log) for log in outcome.logs]
    except codec.DecodeError as error:
        raise BundleError(f"the task outcome holds an undecodable message: {error}") from None
    if not isinstance(result, m.TaskResult) or not all(isinstance(log, m.TaskLog) for log in logs):
        raise BundleError("the task outcome does not hold a TaskResult")
    return result, outcome.objects, [log for log in logs if isinstance(log, m.TaskLog)]


def _load(data: bytes, kind: type, what: str) -> Any:
    try:
        value = pickle.loads(data)
    except Exception as error:
        raise BundleError(f"the {what} ({len(data):,} bytes) could not be read: {error!r}") from None
    if not isinstance(value, kind):
        raise BundleError(f"the {what} is a {type(value).__name__}, not a {kind.__name__}")
    found = getattr(value, "format", None)
    if found != BUNDLE_FORMAT:
        raise BundleError(f"the {what} has format {found}; this version reads format {BUNDLE_FORMAT}")
    return value
