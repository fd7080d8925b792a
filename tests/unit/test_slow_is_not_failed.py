"""Issue 74, item 7, on the processor's and the client's side (the storage client's silence bound is in
test_storage_client_core.py, the scheduler's retry in scheduler/test_input_refetch.py):

- a task whose input could not be fetched (storage silent or unreachable) ends INPUT_UNREACHABLE naming the object and
  why, which the scheduler retries, not FAILED with the storage's exception as the task's own error;
- a future whose task failed answers `result()` and `exception()` with the same error every time, without reading
  storage again (counted), whatever the error (an ObjectStorageException the task raised included); only a successful
  task's value that could not be read is read again by the next call.

Checked by switching the mechanisms off: without the `except ObjectStorageException` in `TaskDecoder._fetch_frames`
the first two tests find FAILED; with `_materialize` raising an ObjectStorageException without remembering it (as
before), the future's tests find ten errors that are not the same object.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from scaler.client.future import ScalerFuture
from scaler.errors import MissingObjects, ObjectStorageException
from scaler.payload.references import ObjectReference
from scaler.payload.result_reader import ResultReader
from scaler.payload.serializer import DefaultSerializer
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from tests.unit.test_payload import DictStorage, Sides

SILENT = "object storage at tcp://198.51.100.1:2346 sent nothing for 60 s (stopped, frozen or cut off)"


class SilentStorage(DictStorage):
    """A storage that goes silent for the objects in `silent`, and counts the reads."""

    def __init__(self) -> None:
        super().__init__()
        self.silent: set[bytes] = set()
        self.reads = 0

    def get_frames(self, object_id: bytes, copy_on_write: bool = False, pieces: bool = False) -> list[memoryview]:
        self.reads += 1
        if bytes(object_id) in self.silent:
            raise ObjectStorageException(SILENT)
        return super().get_frames(object_id, copy_on_write, pieces)

    def read_in_parts(self, object_id: bytes, consume: Any) -> Any:
        raise AssertionError("not used: maps_objects() is True")

    def maps_objects(self) -> bool:
        return True


def norm(array: Any) -> float:
    return float(np.linalg.norm(array))


def test_an_argument_that_could_not_be_fetched_ends_the_task_input_unreachable_naming_it() -> None:
    storage = SilentStorage()
    sides = Sides(storage)
    task = sides.task(norm, np.ones(100_000))  # over the inline limit: an object in storage
    storage.silent.update(storage.objects)  # every object: the function's too
    ended = sides.decoder.decode(task)
    assert isinstance(ended, m.TaskResult) and ended.status is m.ResultStatus.INPUT_UNREACHABLE, ended
    assert "could not be fetched" in ended.error_message and SILENT in ended.error_message
    assert any(object_id.hex() in ended.error_message for object_id in storage.objects)


def test_a_reference_inside_an_argument_that_could_not_be_fetched_ends_it_input_unreachable_too() -> None:
    storage = SilentStorage()
    sides = Sides(storage)
    payload = DefaultSerializer().serialize(list(range(10)))
    reference = ObjectReference(b"numbers", len(payload), sides.encoder.put_object(payload, "numbers"))
    task = sides.task(len, {"inside": reference})
    storage.silent.add(bytes(reference.object_id))
    ended = sides.decoder.decode(task)
    assert isinstance(ended, m.TaskResult) and ended.status is m.ResultStatus.INPUT_UNREACHABLE, ended
    assert bytes(reference.object_id).hex() in ended.error_message


def failed_with(error: BaseException) -> m.TaskResult:
    payload = pickle.dumps((error, "Traceback: ..."))
    return m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.FAILED, m.PayloadKind.INLINE, payload, str(error))


def future_over(storage: SilentStorage) -> ScalerFuture:
    return ScalerFuture(TaskID(b"t" * 16), ResultReader(DefaultSerializer(), lambda: storage), None)


@pytest.mark.parametrize(
    "result",
    [
        failed_with(ObjectStorageException("object storage at tcp://x:1: the task's own put could not be stored")),
        failed_with(ValueError("the task's own error")),
        m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.INPUT_UNREACHABLE, error_message=SILENT),
    ],
    ids=["storage-error-raised-by-the-task", "plain-error", "input-unreachable"],
)
def test_a_failed_task_answers_the_same_error_every_time_without_reading_storage(result: m.TaskResult) -> None:
    storage = SilentStorage()
    future = future_over(storage)
    future.set_task_result(result)
    errors = []
    for _ in range(10):
        with pytest.raises(Exception) as raised:
            future.result()
        errors.append(raised.value)
        assert future.exception() is raised.value
    assert all(error is errors[0] for error in errors)  # the second and the tenth call: the same error
    assert storage.reads == 0


def test_a_result_gone_from_storage_is_remembered_and_read_once() -> None:
    storage = SilentStorage()
    future = future_over(storage)
    future.set_task_result(m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o" * 32))
    for _ in range(10):
        with pytest.raises(MissingObjects):
            future.result()
    assert storage.reads == 1


def test_a_value_that_could_not_be_read_is_read_again_by_the_next_call_once_each() -> None:
    storage = SilentStorage()
    value = DefaultSerializer().serialize(b"v" * 100_000)
    storage.put(b"o" * 32, value)
    storage.silent.add(b"o" * 32)
    future = future_over(storage)
    future.set_task_result(m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o" * 32))
    with pytest.raises(ObjectStorageException, match="sent nothing for 60 s"):
        future.result()
    assert storage.reads == 1  # one read per call: no retries with pauses
    storage.silent.clear()
    assert future.result() == b"v" * 100_000
    assert future.result() == b"v" * 100_000 and storage.reads == 2
