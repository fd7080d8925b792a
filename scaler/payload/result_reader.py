"""Turns a TaskResult into the task's value, or into the exception the caller should see."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from typing import Any

from scaler import errors
from scaler.payload.serializer import Serializer, deserialize_frames
from scaler.protocol import messages as m

#: Exceptions for the statuses that carry only a message.
STATUS_ERRORS: dict[m.ResultStatus, type[Exception]] = {
    m.ResultStatus.WORKER_DIED: errors.WorkerDiedError,
    m.ResultStatus.PROCESSOR_DIED: errors.ProcessorDiedError,
    m.ResultStatus.OUT_OF_MEMORY: errors.ProcessorOutOfMemoryError,
    m.ResultStatus.HOST_LOST: errors.WorkerDiedError,  # the scheduler turns it into a retry; never expected here
    m.ResultStatus.TIMED_OUT: errors.TaskTimeoutError,
    m.ResultStatus.NOT_SERIALIZABLE: errors.ResultNotSerializableError,
    m.ResultStatus.MISSING_OBJECT: errors.MissingObjects,
    m.ResultStatus.NO_WORKER: errors.NoWorkerError,
    m.ResultStatus.CANCELED: errors.ClientCancelledException,
    m.ResultStatus.ERROR: errors.ScalerError,
    m.ResultStatus.ACTOR_RESTARTED: errors.ActorRestartedError,
    m.ResultStatus.ACTOR_DIED: errors.ActorDiedError,
}


class LaterDeletes:
    """Deletes read results from object storage on a thread of its own, so that reading a result does not wait for
    its delete's round trip (over a laptop's link, one round trip of the link after the value is there). Ids queued
    while a delete is under way leave together in the next one; the thread ends when nothing is left. A delete that
    fails is let go: the owner's cleanup deletes the client's objects anyway (`clear()`, its leaving)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, bytes]] = []
        self._running = False

    def add(self, storage: Any, object_id: bytes) -> None:
        with self._lock:
            self._pending.append((storage, bytes(object_id)))
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._run, name="scaler-result-deletes", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._running = False
                    return
                batch, self._pending = self._pending, []
            by_storage: dict[int, tuple[Any, list[bytes]]] = {}
            for storage, object_id in batch:
                by_storage.setdefault(id(storage), (storage, []))[1].append(object_id)
            for storage, object_ids in by_storage.values():
                try:
                    storage.delete(object_ids)
                except Exception:  # the owner's cleanup deletes it anyway
                    pass


class ResultReader:
    def __init__(self, serializer: Serializer, storage: Callable[[], Any], keep_objects: bool = False) -> None:
        """`keep_objects`: leave a result stored after reading it (a job's: other clients may attach and read it;
        the scheduler frees it when the job expires). Otherwise a result read is deleted from storage after the
        read, without waiting for the delete (`LaterDeletes`)."""
        self._serializer = serializer
        self._storage = storage
        self._keep_objects = keep_objects
        self._deletes = LaterDeletes()

    def read(self, result: m.TaskResult) -> Any:
        if result.status is m.ResultStatus.SUCCESS:
            frames = self._frames(result)
            try:
                return deserialize_frames(self._serializer, frames)
            except Exception as error:
                size = sum(len(frame) for frame in frames)
                raise errors.DeserializeObjectError(
                    f"the task's result ({size:,} bytes) could not be deserialized here: {error!r} (a module "
                    f"or class the result needs may be missing or different on the client's side)"
                ) from error
        if result.status is m.ResultStatus.FAILED:
            raise self._exception(result.payload)  # exceptions travel inline
        raise STATUS_ERRORS[result.status](result.error_message)

    def stream_value(self, item: m.StreamItem) -> Any:
        """A streaming task's value (fetched from storage, and deleted there, when it travelled as an object)."""
        frames = self._frames(item)
        try:
            return deserialize_frames(self._serializer, frames)
        except Exception as error:
            size = sum(len(frame) for frame in frames)
            raise errors.DeserializeObjectError(
                f"value #{item.index} of the stream ({size:,} bytes) could not be deserialized here: "
                f"{error!r} (a module or class it needs may be missing or different on the client's side)"
            ) from error

    def _frames(self, result: m.TaskResult | m.StreamItem) -> list[memoryview]:
        """The result's (or stream value's) frames: inline, or read from storage. A client on the storage's host maps
        the segment file read-only, as processors do: a numpy array (a pandas frame's blocks) is a read-only view of
        the one copy in shared memory, built without copying it, and it keeps its map alive (deleting the object
        after the read unlinks the file; the memory goes with the value's last reference). Over a CURVE connection a
        large frame may come as its pieces, which `deserialize_frames` joins."""
        if result.payload_kind is not m.PayloadKind.OBJECT_ID:
            return [memoryview(result.payload)]
        storage = self._storage()
        # over CURVE a large frame comes in pieces: deserialize_frames joins them itself, copying once
        frames: list[memoryview] = storage.get_frames(result.payload, pieces=True)
        if not self._keep_objects:
            self._deletes.add(storage, result.payload)
        return frames

    @staticmethod
    def _exception(payload: bytes | bytearray | memoryview) -> BaseException:
        try:
            error, trace = pickle.loads(payload)
        except Exception as problem:
            return errors.DeserializeObjectError(
                f"the task failed, and its exception could not be read here: {problem!r}"
            )
        if isinstance(error, BaseException):
            if trace and error.__cause__ is None:
                error.__cause__ = errors.RemoteTraceback(f'\n"""\n{trace}"""')
            return error
        return errors.ScalerError(f"the task failed with a non-exception value {error!r}")
