"""Turns a TaskResult into the task's value, or into the exception the caller should see."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from typing import Any

from scaler import errors
from scaler.payload.serializer import FrameSource, Serializer, deserialize_frames, deserialize_source
from scaler.payload.storage import ReadsInParts
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
    m.ResultStatus.INPUT_UNREACHABLE: errors.ObjectStorageException,
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


class _NotDeserialized(Exception):
    def __init__(self, size: int, error: Exception) -> None:
        super().__init__(size, error)
        self.size = size
        self.error = error


class ResultReader:
    def __init__(
        self,
        serializer: Serializer,
        storage: Callable[[], Any],
        keep_objects: bool = False,
        read_in_parts: Callable[[Any, bytes, Callable[[Any], Any]], Any] | None = None,
    ) -> None:
        """`keep_objects`: leave a result stored after reading it (a job's: other clients may attach and read it;
        the scheduler frees it when the job expires). Otherwise a result read is deleted from storage after the
        read, without waiting for the delete (`LaterDeletes`). `read_in_parts(storage, object_id, consume)`: how a
        result is read over a socket (a client's: from the host that holds it, client/holder_reads.py); None: with
        `storage.read_in_parts`."""
        self._serializer = serializer
        self._storage = storage
        self._read_in_parts = read_in_parts
        self._keep_objects = keep_objects
        self._deletes = LaterDeletes()

    def read(self, result: m.TaskResult) -> Any:
        if result.status is m.ResultStatus.SUCCESS:
            try:
                return self._value(result)
            except _NotDeserialized as problem:
                raise errors.DeserializeObjectError(
                    f"the task's result ({problem.size:,} bytes) could not be deserialized here: {problem.error!r} (a "
                    f"module or class the result needs may be missing or different on the client's side)"
                ) from problem.error
        if result.status is m.ResultStatus.FAILED:
            raise self._exception(result.payload)  # exceptions travel inline
        raise STATUS_ERRORS[result.status](result.error_message)

    def stream_value(self, item: m.StreamItem) -> Any:
        """A streaming task's value (fetched from storage, and deleted there, when it travelled as an object)."""
        try:
            return self._value(item)
        except _NotDeserialized as problem:
            raise errors.DeserializeObjectError(
                f"value #{item.index} of the stream ({problem.size:,} bytes) could not be deserialized here: "
                f"{problem.error!r} (a module or class it needs may be missing or different on the client's side)"
            ) from problem.error

    def _value(self, result: m.TaskResult | m.StreamItem) -> Any:
        """The result's (or stream value's) value: inline, or read from storage. A client on the storage's host maps
        the segment file read-only, as processors do: a numpy array (a pandas frame's blocks) is a read-only view of
        the one copy in shared memory, built without copying it, and it keeps its map alive (deleting the object
        after the read unlinks the file; the memory goes with the value's last reference). Elsewhere the object is
        read in parts (`read_in_parts`): each piece is copied to its place in the value while the next ones cross
        the network, so that the value is ready when its last byte has come (reading it whole, then joining its
        pieces, took a pass over the object after the transfer: 0.12 s for 100 MB here). Raises _NotDeserialized."""
        if result.payload_kind is not m.PayloadKind.OBJECT_ID:
            return self._deserialized([memoryview(result.payload)])
        storage = self._storage()
        try:
            if isinstance(storage, ReadsInParts) and not storage.maps_objects():
                if self._read_in_parts is not None:
                    value = self._read_in_parts(storage, result.payload, self._deserialized_source)
                else:
                    value = storage.read_in_parts(result.payload, self._deserialized_source)
            else:
                # over CURVE a large frame comes in pieces: deserialize_frames joins them itself, copying once
                value = self._deserialized(storage.get_frames(result.payload, pieces=True))
        except _NotDeserialized:
            self._read(storage, result.payload)  # read, if not understood: a second read would fail alike
            raise
        self._read(storage, result.payload)
        return value

    def _read(self, storage: Any, object_id: bytes) -> None:
        if not self._keep_objects:
            self._deletes.add(storage, object_id)

    def _deserialized(self, frames: list[memoryview]) -> Any:
        try:
            return deserialize_frames(self._serializer, frames)
        except Exception as error:
            raise _NotDeserialized(sum(len(frame) for frame in frames), error) from error

    def _deserialized_source(self, source: FrameSource) -> Any:
        try:
            return deserialize_source(self._serializer, source)
        except errors.ScalerError:
            raise  # the read failed (or started over), not the value
        except Exception as error:
            raise _NotDeserialized(sum(source.frame_bytes), error) from error

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
