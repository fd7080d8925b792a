"""A task packed for a remote system and run there: the outcome is what a local processor would have produced."""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle
import pytest

from scaler.errors import MissingObjects
from scaler.payload.remote_bundle import BundleError, TaskBundle, object_ids_of, open_outcome, pack_task
from scaler.payload.serializer import RAW_BYTES_THRESHOLD, DefaultSerializer, serialize_to_frames
from scaler.payload.storage import INLINE_LIMIT_BYTES
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, ObjectID, TaskID
from scaler.worker.task_execution import run_bundle

CLIENT = ClientID(b"Client|tests")


class DictStorage:
    """Objects as the frames they were put in (a bytes value is one frame)."""

    def __init__(self, objects: dict[bytes, bytes | list[bytes]]) -> None:
        self.objects = objects

    def get_frames(self, object_id: bytes, copy_on_write: bool = False) -> list[memoryview]:
        try:
            frames = self.objects[object_id]
        except KeyError:
            raise MissingObjects(f"object {object_id.hex()} not found") from None
        return [memoryview(frame) for frame in ([frames] if isinstance(frames, bytes) else frames)]

    def get(self, object_id: bytes) -> bytes:
        return b"".join(self.get_frames(object_id))


def make_task(function: Any, *args: Any, stored_args: tuple[Any, ...] = ()) -> tuple[m.Task, DictStorage]:
    objects: dict[bytes, bytes | list[bytes]] = {b"f" * 16: cloudpickle.dumps(function)}
    arguments = [m.Argument(m.ArgumentKind.INLINE, cloudpickle.dumps(value)) for value in args]
    for number, value in enumerate(stored_args):
        object_id = bytes([number]) * 16
        objects[object_id] = serialize_to_frames(DefaultSerializer(), value)
        arguments.append(m.Argument(m.ArgumentKind.OBJECT_ID, object_id))
    body = codec.encode_body(m.TaskBody(ObjectID(b"f" * 16), tuple(arguments)))
    return m.Task(TaskID(b"t" * 16), CLIENT, body, "f"), DictStorage(objects)


def run_remotely(task: m.Task, storage: DictStorage) -> tuple[m.TaskResult, dict[bytes, Any], list[m.TaskLog]]:
    bundle = pack_task(task, storage)
    return open_outcome(run_bundle(bundle))


def add(x: int, y: int) -> int:
    return x + y


def fail(text: str) -> None:
    raise KeyError(text)


def big(size: int) -> bytes:
    return b"x" * size


def chatty() -> int:
    print("hello from far away")
    return 1


def test_a_task_runs_from_its_bundle_alone_with_inline_and_stored_arguments() -> None:
    task, storage = make_task(add, 2, stored_args=(40,))
    assert object_ids_of(task) == [b"f" * 16, b"\x00" * 16]
    result, objects, _logs = run_remotely(task, storage)
    assert result.status is m.ResultStatus.SUCCESS and pickle.loads(result.payload) == 42
    assert objects == {}


def length(data: bytes) -> int:
    return len(data)


def test_a_large_bytes_object_travels_as_its_frames_and_is_read_back_as_bytes() -> None:
    """`send_object(bytes of 1 MiB or more)` stores a marker frame, then the bytes: an offloaded task must get the
    bytes back, not a pickle error (issue 38's spill-path bug, on the bundle's path: bundles of format 1 carried each
    object joined into one frame, and the task failed with UnpicklingError("invalid load key, '\\x00'."))."""
    data = bytes(range(256)) * (RAW_BYTES_THRESHOLD // 256)
    task, storage = make_task(length, stored_args=(data,))
    assert len(storage.get_frames(b"\x00" * 16)) == 2  # the marker, then the bytes
    result, _objects, _logs = run_remotely(task, storage)
    assert result.status is m.ResultStatus.SUCCESS, result.error_message or pickle.loads(result.payload)
    assert pickle.loads(result.payload) == len(data)


def test_an_exception_comes_back_pickled_with_its_remote_traceback() -> None:
    result, _objects, _logs = run_remotely(*make_task(fail, "remote trouble"))
    assert result.status is m.ResultStatus.FAILED
    error, trace = pickle.loads(result.payload)
    assert isinstance(error, KeyError) and "remote trouble" in str(error)
    assert "in fail" in trace


def test_a_result_over_the_inline_limit_comes_back_as_an_object_owned_by_the_client() -> None:
    result, objects, _logs = run_remotely(*make_task(big, INLINE_LIMIT_BYTES + 1))
    assert result.payload_kind is m.PayloadKind.OBJECT_ID
    frames, owner, _name = objects[result.payload]
    assert owner == CLIENT and frames == (pickle.dumps(b"x" * (INLINE_LIMIT_BYTES + 1), protocol=5),)


def test_streamed_output_comes_back_with_the_result() -> None:
    task, storage = make_task(chatty)
    body = codec.decode_body(task.body)
    task = m.Task(task.task_id, CLIENT, codec.encode_body(m.TaskBody(body.function_id, stream_output=True)), "chatty")
    result, _objects, logs = run_remotely(task, storage)
    assert result.status is m.ResultStatus.SUCCESS
    assert "hello from far away" in "".join(log.text for log in logs)


def test_packing_a_task_whose_object_is_gone_raises_missing_objects() -> None:
    task, storage = make_task(add, 1, stored_args=(2,))
    del storage.objects[b"\x00" * 16]
    with pytest.raises(MissingObjects):
        pack_task(task, storage)


@pytest.mark.parametrize(
    "data, words",
    [
        (b"not a pickle", "could not be read"),
        (pickle.dumps({"a": 1}), "not a TaskBundle"),
        (pickle.dumps(TaskBundle(99, b"", {})), "format 99"),
    ],
)
def test_an_unreadable_bundle_is_a_bundle_error_naming_why(data: bytes, words: str) -> None:
    with pytest.raises(BundleError, match=words):
        run_bundle(data)


def test_an_unreadable_outcome_is_a_bundle_error() -> None:
    with pytest.raises(BundleError, match="task outcome"):
        open_outcome(b"\x80\x05garbage")
