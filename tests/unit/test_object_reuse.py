"""A processor uses an object it already holds without asking storage again while the same client, in the same
clear epoch, uses it; after the client's clear() (a new epoch) or for another client it asks, so a deleted
object fails the task and an object stored again is used.

Checked by switching the mechanism off: with the epoch left out of the (client, epoch) key in TaskDecoder
(`self._asker = (client, 0)`), `test_after_clear_a_stale_reference_fails_and_a_stored_again_one_is_used` fails
(the deleted object is used from the cache); without the owner tag comparison, the last test fails the same way;
with the shortcut removed (always asking), the count of `exists`
calls in `test_the_same_client_and_epoch_reuse_an_object_without_asking_storage` is 3, not 0."""

from __future__ import annotations

from typing import Any

from scaler.payload.references import ObjectReference
from scaler.payload.serializer import DefaultSerializer
from scaler.payload.stored_objects import StoredOnce
from scaler.payload.task_decoder import DecodedCall
from scaler.payload.task_encoder import TaskEncoder
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, ObjectID, TaskID
from tests.unit.test_payload import DictStorage, Sides


class CountingStorage(DictStorage):
    def __init__(self) -> None:
        super().__init__()
        self.exists_calls = 0

    def exists(self, object_id: bytes) -> bool:
        self.exists_calls += 1
        return super().exists(object_id)


def total(values: list[int]) -> int:
    return sum(values)


def sides_with_counting_storage() -> Sides:
    sides = Sides()
    sides.storage = CountingStorage()
    return sides


def reference(sides: Sides, encoder: TaskEncoder, value: Any) -> ObjectReference:
    payload = DefaultSerializer().serialize(value)
    return ObjectReference(b"numbers", len(payload), encoder.put_object(payload, "numbers"))


def run(sides: Sides, encoder: TaskEncoder, *args: Any) -> Any:
    entry = encoder.function(total)
    arguments = encoder.arguments(args, {})
    task = encoder.task(
        TaskID(b"t" * 16), entry, arguments, profiling=False, stream_output=False, priority=0, capabilities=()
    )
    call = sides.decoder.decode(task)
    if not isinstance(call, DecodedCall):
        return call
    return call.function(*call.args, **call.kwargs)


def test_the_same_client_and_epoch_reuse_an_object_without_asking_storage() -> None:
    sides = sides_with_counting_storage()
    numbers = reference(sides, sides.encoder, list(range(10)))
    assert [run(sides, sides.encoder, numbers) for _ in range(4)] == [45] * 4
    assert sides.storage.exists_calls == 0  # type: ignore[attr-defined]


def test_after_clear_a_stale_reference_fails_and_a_stored_again_one_is_used() -> None:
    sides = sides_with_counting_storage()
    numbers = reference(sides, sides.encoder, list(range(10)))
    assert run(sides, sides.encoder, numbers) == 45
    sides.storage.objects.clear()  # client.clear(): its objects deleted ...
    sides.encoder.forget_stored()  # ... and its next tasks carry a new clear epoch
    failed = run(sides, sides.encoder, numbers)
    assert isinstance(failed, m.TaskResult) and failed.status is m.ResultStatus.MISSING_OBJECT
    assert "clear" in str(failed.error_message)
    again = reference(sides, sides.encoder, list(range(10)))  # the same content stored again: the same id
    assert again.object_id == numbers.object_id
    assert run(sides, sides.encoder, again) == 45
    assert run(sides, sides.encoder, again) == 45


def test_another_client_using_a_held_object_asks_storage_every_time() -> None:
    """Another client's task cannot know when the object's owner left (and its objects were deleted)."""
    sides = sides_with_counting_storage()
    numbers = reference(sides, sides.encoder, list(range(10)))
    assert run(sides, sides.encoder, numbers) == 45

    def store(object_id: ObjectID, payload: Any, name: str) -> None:
        sides.storage.put(object_id, payload)

    other = TaskEncoder(ClientID(b"Client|another"), DefaultSerializer(), StoredOnce(store))
    assert run(sides, other, numbers) == 45
    assert sides.storage.exists_calls == 1  # type: ignore[attr-defined]
    sides.storage.objects.pop(numbers.object_id)  # its owner left: its objects are deleted
    failed = run(sides, other, numbers)
    assert isinstance(failed, m.TaskResult) and failed.status is m.ResultStatus.MISSING_OBJECT
