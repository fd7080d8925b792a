"""A call's outcome as a TaskResult, on the processor's side (the client reads it with `result_reader`).

The return value travels inline up to `INLINE_LIMIT_BYTES`, else as an object in storage owned by the task's
client (its frames: pickle protocol 5 buffers out of band, serializer.serialize_to_frames); an exception travels
pickled with its traceback text; a value that cannot be serialized, or stored, ends the task with a status or an
exception that says so. A streaming task's values travel the same way, each as a StreamItem (`stream_item`).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import cloudpickle

from scaler.errors import ObjectStorageException, TaskExceptionNotSerializableError
from scaler.payload.serializer import Serializer, one_payload, serialize_to_frames
from scaler.payload.storage import INLINE_LIMIT_BYTES, FollowsPuts, StorageAccess
from scaler.protocol import messages as m
from scaler.protocol.ids import new_random_object_id

NO_PROFILE = m.Profile()


class NotStreamable(Exception):
    """A streaming task's value could not be serialized, or stored: the stream ends with this error."""


def stream_item(
    task: m.Task, index: int, serializer: Serializer, value: Any, storage: Callable[[], StorageAccess]
) -> m.StreamItem:
    """The StreamItem of a streaming task's value `index`: inline up to the inline limit, else an object in storage
    owned by the task's client (which deletes it once read), as a result. Raises NotStreamable, saying why not."""
    try:
        payload = serializer.serialize(value)
    except Exception as error:
        raise NotStreamable(
            f"value #{index} of the stream, of type {type(value).__qualname__}, could not be serialized: {error!r}"
        ) from None
    if len(payload) <= INLINE_LIMIT_BYTES:
        return m.StreamItem(task.task_id, index, m.PayloadKind.INLINE, payload)
    object_id = new_random_object_id()
    try:
        storage().put(object_id, payload, owner_id=task.client_id, name="stream value")
    except ObjectStorageException as error:
        raise NotStreamable(
            f"value #{index} of the stream ({len(payload):,} bytes, over the {INLINE_LIMIT_BYTES // 1024} KiB inline "
            f"limit) could not be stored in object storage: {error}"
        ) from None
    return m.StreamItem(task.task_id, index, m.PayloadKind.OBJECT_ID, object_id)


def succeeded_result(
    task: m.Task, serializer: Serializer, value: Any, profile: m.Profile, storage: Callable[[], StorageAccess]
) -> m.TaskResult:
    """The TaskResult of a call that returned `value`."""
    try:
        frames = serialize_to_frames(serializer, value)
        size = sum(memoryview(frame).nbytes for frame in frames)
        if size <= INLINE_LIMIT_BYTES:
            payload = one_payload(serializer, value, frames)
            return m.TaskResult(task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, payload, profile=profile)
    except Exception as error:
        text = f"the task's result of type {type(value).__qualname__} could not be serialized: {error!r}"
        return m.TaskResult(task.task_id, m.ResultStatus.NOT_SERIALIZABLE, error_message=text, profile=profile)
    object_id = task.result_id or new_random_object_id()  # a task run again: its readers wait for this id
    try:
        # a processor on the storage's host writes the frames into a segment file and has it adopted (no copy through
        # the socket); the TaskResult leaves once the object is stored, or, for a large one nobody can change, once the
        # server knows it is being written: its readers follow the write, and the processor's agent, told it still
        # writes, keeps it from new tasks and retirement until it is stored (followed_put.py, processor/process.py)
        store = storage()
        if not (isinstance(store, FollowsPuts) and store.put_followed(object_id, frames, task.client_id, "result")):
            store.put(object_id, frames, owner_id=task.client_id, name="result")
    except ObjectStorageException as error:  # the processor lives on; the task fails and says why
        problem = ObjectStorageException(
            f"the task's result ({size:,} bytes, over the {INLINE_LIMIT_BYTES // 1024} KiB inline limit) "
            f"could not be stored in object storage: {error}"
        )
        return failed_result(task, problem, "")
    return m.TaskResult(
        task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, object_id, profile=profile,
        stored_bytes=size,
    )  # fmt: skip


def failed_result(task: m.Task, error: BaseException, trace: str) -> m.TaskResult:
    """The TaskResult of a call that raised `error` (`trace`: its traceback text, shown in the client)."""
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
