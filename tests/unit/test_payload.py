"""A call's way through `scaler.payload`, both sides in one process: the client's TaskEncoder makes the Task, the
processor's TaskDecoder makes the call, result_writer packs its outcome, the client's ResultReader opens it. The
storage is a dict; no process, no socket."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scaler.errors import MissingObjects, RemoteTraceback
from scaler.payload.references import ObjectReference
from scaler.payload.result_reader import ResultReader
from scaler.payload.result_writer import NO_PROFILE, failed_result, succeeded_result
from scaler.payload.serializer import DefaultSerializer, serialize_to_frames
from scaler.payload.storage import INLINE_LIMIT_BYTES
from scaler.payload.stored_objects import StoredOnce
from scaler.payload.task_decoder import DecodedCall, TaskDecoder
from scaler.payload.task_encoder import TaskEncoder
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID

CLIENT = ClientID(b"Client|payload-test")


class DictStorage:
    """Object storage as a dict, with the calls the client and the processor make."""

    def __init__(self) -> None:
        self.objects: dict[bytes, list[bytes]] = {}

    def put(self, object_id: bytes, payload: Any, owner_id: bytes = b"", name: str = "") -> None:
        self.objects[object_id] = [bytes(frame) for frame in payload] if isinstance(payload, list) else [payload]

    def get_frames(self, object_id: bytes, copy_on_write: bool = False) -> list[memoryview]:
        """Read-only views, as of a shared map; `copy_on_write`: writable copies, as of a private one."""
        if object_id not in self.objects:
            raise MissingObjects(f"object {object_id.hex()} not found")
        if copy_on_write:
            return [memoryview(bytearray(frame)) for frame in self.objects[object_id]]
        return [memoryview(frame) for frame in self.objects[object_id]]

    def get(self, object_id: bytes) -> bytes:
        return b"".join(self.get_frames(object_id))

    def exists(self, object_id: bytes) -> bool:
        return object_id in self.objects

    def delete(self, object_ids: list[bytes]) -> None:
        for object_id in object_ids:
            self.objects.pop(object_id, None)


class Sides:
    """A client's encoder and reader and a processor's decoder over one storage."""

    def __init__(self) -> None:
        self.storage = DictStorage()
        objects = StoredOnce(lambda object_id, payload, name: self.storage.put(object_id, payload))
        self.encoder = TaskEncoder(CLIENT, DefaultSerializer(), objects)
        self.decoder = TaskDecoder(lambda: self.storage)
        self.reader = ResultReader(DefaultSerializer(), lambda: self.storage)

    def task(self, function: Any, *args: Any, **kwargs: Any) -> m.Task:
        entry = self.encoder.function(function)
        return self.encoder.task(
            TaskID(b"t" * 16), entry, self.encoder.arguments(args, kwargs), profiling=False, stream_output=False,
            priority=0, capabilities=(),
        )  # fmt: skip

    def call(self, task: m.Task) -> DecodedCall:
        call = self.decoder.decode(task)
        assert isinstance(call, DecodedCall), call
        return call

    def run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """The value the client reads for function(*args, **kwargs), through every step."""
        task = self.task(function, *args, **kwargs)
        call = self.call(task)
        value = call.function(*call.args, **call.kwargs)
        result = succeeded_result(task, call.serializer, value, NO_PROFILE, lambda: self.storage)
        return self.reader.read(result)


def concatenate(head: bytes, tail: bytes = b"") -> bytes:
    return head + tail


def total(values: list[int], scale: int = 1) -> int:
    return sum(values) * scale


def test_a_call_travels_inline_and_its_value_comes_back() -> None:
    sides = Sides()
    assert sides.run(concatenate, b"ab", tail=b"cd") == b"abcd"
    assert len(sides.storage.objects) == 1  # the function only


def test_a_large_argument_and_a_large_result_travel_through_storage() -> None:
    """Checked by making the encoder, then the writer, always inline: the argument, then the result, assertion fails."""
    sides = Sides()
    big = b"x" * (INLINE_LIMIT_BYTES + 1)
    task = sides.task(concatenate, big, tail=b"!")
    assert [argument.kind for argument in codec.decode_body(task.body).args] == [
        m.ArgumentKind.OBJECT_ID, m.ArgumentKind.INLINE,
    ]  # fmt: skip
    assert len(sides.storage.objects) == 2  # the function and the argument
    call = sides.call(task)
    result = succeeded_result(task, call.serializer, call.function(*call.args, **call.kwargs), NO_PROFILE,
                              lambda: sides.storage)  # fmt: skip
    assert result.payload_kind is m.PayloadKind.OBJECT_ID and len(sides.storage.objects) == 3
    assert sides.reader.read(result) == big + b"!"
    assert len(sides.storage.objects) == 2  # the reader deleted the result it read


def test_an_object_reference_anywhere_in_the_arguments_is_the_object() -> None:
    sides = Sides()
    frames = serialize_to_frames(DefaultSerializer(), [1, 2, 3])
    object_id = sides.encoder.put_object(frames[0], "numbers")
    reference = ObjectReference(b"numbers", len(frames[0]), object_id)
    assert sides.run(total, reference, scale=2) == 12
    call = sides.call(sides.task(lambda items: items, [reference, {"key": reference}]))
    assert call.args == [[[1, 2, 3], {"key": [1, 2, 3]}]]


def test_an_exception_comes_back_with_the_remote_traceback() -> None:
    sides = Sides()
    task = sides.task(concatenate, b"a")
    try:
        raise KeyError("missing")
    except KeyError as error:
        result = failed_result(task, error, "Traceback: the task's own lines\n")
    with pytest.raises(KeyError, match="missing") as raised:
        sides.reader.read(result)
    assert isinstance(raised.value.__cause__, RemoteTraceback)


def test_a_task_whose_object_is_gone_ends_before_its_call_with_missing_object() -> None:
    sides = Sides()
    task = sides.task(concatenate, b"x" * (INLINE_LIMIT_BYTES + 1))
    sides.storage.objects = {key: value for key, value in sides.storage.objects.items() if len(value[0]) < 1000}
    ended = sides.decoder.decode(task)
    assert isinstance(ended, m.TaskResult) and ended.status is m.ResultStatus.MISSING_OBJECT
    with pytest.raises(MissingObjects):
        sides.reader.read(ended)


def test_a_value_that_cannot_be_serialized_ends_with_its_status() -> None:
    sides = Sides()
    task = sides.task(concatenate, b"a")
    call = sides.call(task)
    unpicklable = threading.Lock()
    result = succeeded_result(task, call.serializer, unpicklable, NO_PROFILE, lambda: sides.storage)
    assert result.status is m.ResultStatus.NOT_SERIALIZABLE
