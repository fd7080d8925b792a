"""Arguments over the inline limit are stored pipelined (object_storage/put_pipeline.py), and no task leaves before its
arguments are stored.

How each test was checked to fail with the mechanism off: with `PutGate.submit` returning its items at once (no
holding), `test_no_task_leaves_before_its_arguments_are_stored` fails on its first assertion (the tasks leave while
the object storage is not even running). With the failing put not failing its held tasks (`doomed` dropped in
`PutPipeline._carry_out`), `test_tasks_behind_a_put_that_cannot_be_stored_fail_with_the_storage_error` times out
waiting for the failures. With `PutPipeline.put` writing the object's segment file itself (as it did before the
thread took the writes), `test_the_callers_thread_writes_no_segment_file` fails on its assertion on the writers;
with `PutPipeline._carry_out` releasing each `Released` on its own,
`test_releases_that_follow_each_other_leave_together` fails on the calls it counts.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import ObjectStorageException
from scaler.object_storage.client_core import PutFailed, Released
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.local_segments import LocalSegments
from scaler.object_storage.put_pipeline import PutPipeline, _Hold, _Put
from scaler.payload.task_encoder import content_id
from scaler.protocol.ids import ObjectID
from tests.integration.conftest import Launcher, free_addresses, session_security, wait_for

pytestmark = pytest.mark.integration

OWNER = b"pipelined-test-client"


def checksum(data: bytes) -> int:
    return zlib.crc32(data)


def test_no_task_leaves_before_its_arguments_are_stored(launcher: Launcher) -> None:
    address = free_addresses().object_storage
    released: list[tuple[str, bool]] = []
    failures: list[BaseException] = []
    objects: dict[str, ObjectID] = {}
    keys = session_security("client")  # the storage is secure by default
    checker = ObjectStorageConnection(address, role="client", owner_id=OWNER, timeout_seconds=20, security=keys)

    def release(items: list[str]) -> None:  # what "sending to the scheduler" would be; records what is stored then
        released.extend((item, checker.exists(objects[item])) for item in items)

    pipeline: PutPipeline[str] = PutPipeline(
        address, OWNER, keys, 30.0, release, lambda items, error: failures.append(error), lambda object_id: None
    )
    try:
        for index in range(20):
            payload = bytes([index]) * 100_000
            objects[f"task-{index}"] = content_id(OWNER, payload)
            pipeline.put(objects[f"task-{index}"], payload, f"argument {index}")
            pipeline.submit([f"task-{index}"])
        assert released == [], "tasks left while the object storage holding their arguments was not running"
        launcher.object_storage(address)
        wait_for(lambda: len(released) == 20, "the 20 held tasks released", timeout_seconds=30)
        assert released == [(f"task-{index}", True) for index in range(20)]  # in order, each argument stored
        assert failures == []
    finally:
        pipeline.close(0.0)
        checker.close()


def test_tasks_behind_a_put_that_cannot_be_stored_fail_with_the_storage_error() -> None:
    address = free_addresses().object_storage  # nothing listens here
    failed: list[tuple[str, BaseException]] = []
    forgotten: list[ObjectID] = []
    pipeline: PutPipeline[str] = PutPipeline(
        address, OWNER, None, 1.0, lambda items: None, lambda items, error: failed.extend((i, error) for i in items),
        forgotten.append,
    )  # fmt: skip
    try:
        object_id = content_id(OWNER, b"x" * 100_000)
        pipeline.put(object_id, b"x" * 100_000, "argument")
        pipeline.submit(["held"])
        wait_for(lambda: len(failed) == 1, "the held task failed", timeout_seconds=30)
        assert failed[0][0] == "held" and isinstance(failed[0][1], ObjectStorageException)
        assert forgotten == [object_id]  # the encoder stores it again on its next use
    finally:
        pipeline.close(0.0)


def test_many_tasks_with_their_own_large_arguments_get_their_own_results(shared_cluster: SchedulerClusterCombo) -> None:
    payloads = [bytes([index % 256]) * 70_000 + index.to_bytes(4, "little") for index in range(200)]
    with Client(address=shared_cluster.get_address()) as client:
        futures = [client.submit(checksum, payload) for payload in payloads]
        futures += [client.submit(checksum, payloads[0]) for _ in range(20)]  # one stored object, many tasks
        assert [future.result(timeout=60) for future in futures] == [
            zlib.crc32(p) for p in payloads + [payloads[0]] * 20
        ]
        mapped = client.map(checksum, payloads[:50])
        assert mapped == [zlib.crc32(p) for p in payloads[:50]]


def test_a_task_cancelled_while_its_argument_is_being_stored_is_cancelled(
    shared_cluster: SchedulerClusterCombo,
) -> None:
    with Client(address=shared_cluster.get_address()) as client:
        futures: list[Any] = [client.submit(checksum, bytes([i]) * 200_000) for i in range(30)]
        futures[-1].cancel()
        results = [f.result(timeout=60) for f in futures[:-1]]
        assert results == [zlib.crc32(bytes([i]) * 200_000) for i in range(29)]
        wait_for(lambda: futures[-1].done(), "the cancelled future done", timeout_seconds=30)
        assert futures[-1].cancelled() or futures[-1].result() == zlib.crc32(bytes([29]) * 200_000)


def test_a_release_that_submits_again_does_not_deadlock() -> None:
    """A released future's done-callback may submit from inside `release` (under the pipeline's lock). Checked with
    a plain Lock instead of the RLock: this test hangs until its timeout."""
    address = free_addresses().object_storage
    released: list[str] = []
    pipeline: PutPipeline[str] = PutPipeline(address, OWNER, None, 30.0, released.extend, lambda i, e: None, print)

    def release(items: list[str]) -> None:
        released.extend(items)
        if items == ["first"]:
            pipeline.submit(["from the callback"])

    pipeline._release = release
    try:
        pipeline.submit(["first"])
        assert released == ["first", "from the callback"]
    finally:
        pipeline.close(0.0)


def test_the_callers_thread_writes_no_segment_file(launcher: Launcher) -> None:
    """On the storage's host an argument is written into a segment file of its own; the pipeline's thread writes it,
    not the caller's: each system call of the caller's thread let the client's other threads take the GIL (U3's
    submit loop waited about 200 us for it back per open and write)."""
    address = free_addresses().object_storage
    launcher.object_storage(address)
    keys = session_security("client")
    checker = ObjectStorageConnection(address, role="client", owner_id=OWNER, timeout_seconds=20, security=keys)
    writers: list[threading.Thread] = []

    class RecordingSegments(LocalSegments):
        def write(self, object_id: bytes, owner_id: bytes, name: str, buffers: Any) -> str | None:
            writers.append(threading.current_thread())
            return super().write(object_id, owner_id, name, buffers)

    released: list[int] = []
    pipeline: PutPipeline[int] = PutPipeline(address, OWNER, keys, 30.0, released.extend, lambda i, e: None, print)
    try:
        found = checker.local_segments()
        assert found is not None, "the test runs on the storage's host: it sees its segment directory"
        local = RecordingSegments(found.directory)
        object_ids = []
        for index in range(20):
            payload = bytes([index]) * 100_000 + index.to_bytes(4, "little")
            object_ids.append(content_id(OWNER, payload))
            pipeline.put(object_ids[-1], payload, f"argument {index}", local)
            pipeline.submit([index])
        wait_for(lambda: len(released) == 20, "the 20 held items released", timeout_seconds=30)
        assert released == list(range(20))
        assert len(writers) == 20 and threading.current_thread() not in writers, "the caller wrote segment files"
        assert all(checker.exists(object_id) for object_id in object_ids)
        assert bytes(checker.get_frames(object_ids[7])[0]) == bytes([7]) * 100_000 + (7).to_bytes(4, "little")
    finally:
        pipeline.close(0.0)
        checker.close()


def test_releases_that_follow_each_other_leave_together() -> None:
    """The items many storage answers release at once go on in one `release` (one send to the scheduler, not one per
    answer), in order; a failure in between keeps its place."""
    address = free_addresses().object_storage  # nothing listens: only the pipeline's own handling is exercised
    calls: list[list[str]] = []
    failed: list[list[str]] = []
    pipeline: PutPipeline[str] = PutPipeline(
        address, OWNER, None, 30.0, lambda items: calls.append(list(items)), lambda items, e: failed.append(items),
        lambda object_id: None,
    )  # fmt: skip
    try:
        error = ObjectStorageException("refused")
        with pipeline._lock:
            pipeline._carry_out([
                Released(["a"]), Released(["b", "c"]), PutFailed(1, ObjectID(b"x" * 16), error, ["d"]),
                Released(["e"]), Released(["f"]),
            ])  # fmt: skip
        assert calls == [["a", "b", "c"], ["e", "f"]]
        assert failed == [["d"]]
    finally:
        pipeline.close(0.0)


def test_puts_the_core_no_longer_takes_fail_their_tasks() -> None:
    """A put the storage client's core no longer takes (its connection closed, or its server refused it) raises in
    `put`, as the core would (the caller's submit raises, no task is made); one it stopped taking after `put` queued it
    fails, when the thread issues it, with the items held behind it and everything queued after it, instead of
    stopping the thread with them taken and never settled. Checked by hand with `_issue` not catching the refusal:
    it fails on "the refusal stopped the thread" (the thread would stop, its taken items never settled)."""
    address = free_addresses().object_storage  # nothing listens: the puts stay queued in the core
    failed: list[tuple[str, BaseException]] = []
    forgotten: list[ObjectID] = []
    pipeline: PutPipeline[str] = PutPipeline(
        address, OWNER, None, 30.0, lambda items: None, lambda items, error: failed.extend((i, error) for i in items),
        forgotten.append,
    )  # fmt: skip
    try:
        first, second = content_id(OWNER, b"a" * 100_000), content_id(OWNER, b"b" * 100_000)
        with pipeline._lock:  # the thread issues nothing meanwhile
            pipeline._link.core.on_closed()  # from now on the core refuses every request
            with pytest.raises(ObjectStorageException):
                pipeline.put(first, b"a" * 100_000, "argument")
            taken = [
                _Put(first, b"a", [memoryview(b"a")], 1, "argument", None), _Hold(["behind a"]),
                _Put(second, b"b", [memoryview(b"b")], 1, "argument", None), _Hold(["behind b"]),
            ]  # fmt: skip
            try:
                pipeline._issue(taken)  # as the thread issues what it took
            except Exception as error:
                raise AssertionError(f"the refusal stopped the thread: {error!r}") from None
        assert [item for item, _ in failed] == ["behind a", "behind b"]
        assert all(isinstance(error, ObjectStorageException) for _, error in failed)
        assert forgotten == [first, second]
    finally:
        pipeline.close(0.0)


def test_a_put_gives_the_busy_thread_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the thread writes and issues what it took, each `put` releases the GIL once (a submit loop would
    otherwise hold it but for the interpreter's forced switches, and the thread would write few files until the loop
    ends); an idle thread is not given one. Checked by hand with the turn taken out of `put`: the count stays 0."""
    from scaler.object_storage import put_pipeline

    turns: list[int] = []
    monkeypatch.setattr(put_pipeline, "_let_other_threads_run", lambda: turns.append(1))
    address = free_addresses().object_storage  # nothing listens: the puts stay queued in the core
    pipeline: PutPipeline[str] = PutPipeline(address, OWNER, None, 30.0, lambda items: None, print, print)
    try:
        pipeline.put(content_id(OWNER, b"idle"), b"idle" * 30_000, "argument")
        wait_for(lambda: not pipeline._applying and not pipeline._queue, "the first put issued", timeout_seconds=30)
        assert turns == [], "an idle thread was given a turn"
        with pipeline._lock:  # the thread takes the next put, then waits for this lock to issue it
            pipeline.put(content_id(OWNER, b"a"), b"a" * 100_000, "argument")
            wait_for(lambda: pipeline._applying, "the thread took the put", timeout_seconds=30)
            pipeline.put(content_id(OWNER, b"b"), b"b" * 100_000, "argument")
            assert turns == [1]
    finally:
        pipeline.close(0.0)
