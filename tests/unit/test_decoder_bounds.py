"""A processor's caches stay bounded while clients come and go (#32 item 5, the soak): each client has its own ids
for its functions and objects, so without bounds a long-lived processor keeps one of each per client it ever served.

Checked by switching each bound off: with the limit of `_functions` lifted (`RecentlyUsed(1 << 30)`),
`test_functions_of_clients_that_came_and_went_stay_bounded` holds all 40 functions; with `drop_idle` returning at
once, `test_an_object_not_used_for_the_idle_time_is_dropped` still holds the object; without the
`self._objects.drop(key)` on a missing object, `test_an_object_found_deleted_is_dropped_from_the_cache` holds it."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.payload import task_decoder
from scaler.payload.references import ObjectReference
from scaler.payload.serializer import DefaultSerializer
from scaler.payload.stored_objects import StoredOnce
from scaler.payload.task_decoder import OBJECT_IDLE_SECONDS, DecodedCall, ObjectCache, TaskDecoder
from scaler.payload.task_encoder import TaskEncoder
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from tests.unit.test_payload import DictStorage


def total(values: list[int]) -> int:
    return sum(values)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def encoder_of(storage: DictStorage, name: str) -> TaskEncoder:
    return TaskEncoder(
        ClientID(f"Client|{name}".encode()), DefaultSerializer(),
        StoredOnce(lambda object_id, payload, _name: storage.put(object_id, payload)),
    )  # fmt: skip


def run(decoder: TaskDecoder, encoder: TaskEncoder, *args: Any) -> Any:
    task = encoder.task(
        TaskID(b"t" * 16), encoder.function(total), encoder.arguments(args, {}), profiling=False,
        stream_output=False, priority=0, capabilities=(),
    )  # fmt: skip
    call = decoder.decode(task)
    if not isinstance(call, DecodedCall):
        return call
    return call.function(*call.args, **call.kwargs)


def stored(storage: DictStorage, encoder: TaskEncoder, value: Any) -> ObjectReference:
    payload = DefaultSerializer().serialize(value)
    return ObjectReference(b"numbers", len(payload), encoder.put_object(payload, "numbers"))


def test_functions_of_clients_that_came_and_went_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_decoder, "MAX_CACHED_FUNCTIONS", 8)
    storage = DictStorage()
    decoder = TaskDecoder(lambda: storage)
    for number in range(40):  # forty clients, one after another, each with its own id for `total`
        assert run(decoder, encoder_of(storage, f"client-{number}"), [number, 1]) == number + 1
    assert len(decoder._functions) == 8  # the most recent clients' functions only


def test_an_object_not_used_for_the_idle_time_is_dropped() -> None:
    storage, clock = DictStorage(), FakeClock()
    decoder = TaskDecoder(lambda: storage, clock)
    encoder = encoder_of(storage, "leaves")
    numbers = stored(storage, encoder, [1, 2, 3])
    assert run(decoder, encoder, numbers) == 6
    clock.now += OBJECT_IDLE_SECONDS / 2
    assert run(decoder, encoder, numbers) == 6  # used again: kept, and its idle time starts again
    clock.now += OBJECT_IDLE_SECONDS / 2 + 1
    assert len(decoder._objects) == 1
    clock.now += OBJECT_IDLE_SECONDS
    assert run(decoder, encoder_of(storage, "another"), [1]) == 1  # any later task drops what has been idle
    assert len(decoder._objects) == 0


def test_an_object_found_deleted_is_dropped_from_the_cache() -> None:
    storage = DictStorage()
    decoder = TaskDecoder(lambda: storage)
    owner, other = encoder_of(storage, "owner"), encoder_of(storage, "other")
    numbers = stored(storage, owner, [1, 2, 3])
    assert run(decoder, owner, numbers) == 6
    storage.objects.pop(numbers.object_id)  # its owner left: its objects are deleted
    failed = run(decoder, other, numbers)  # another client's task asks storage, and learns it
    assert isinstance(failed, m.TaskResult) and failed.status is m.ResultStatus.MISSING_OBJECT
    assert len(decoder._objects) == 0


def test_the_object_cache_keeps_its_byte_budget_least_recently_used_first_out() -> None:
    cache = ObjectCache(budget_bytes=10, idle_seconds=60)
    cache.put((b"s", b"a"), "a", 4, now=0)
    cache.put((b"s", b"b"), "b", 4, now=1)
    assert cache.get((b"s", b"a"), now=2) == (True, "a")  # now the most recently used
    cache.put((b"s", b"c"), "c", 4, now=3)  # 12 bytes: b goes
    assert cache.get((b"s", b"b"), now=4) == (False, None)
    assert cache.get((b"s", b"c"), now=5) == (True, "c")
    cache.put((b"s", b"c"), "c", 4, now=6)  # the same key again is not counted twice
    cache.put((b"s", b"d"), "d", 2, now=7)
    assert len(cache) == 3
