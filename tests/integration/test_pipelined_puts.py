"""Arguments over the inline limit are stored pipelined (object_storage/put_pipeline.py), and no task leaves before its
arguments are stored.

How each test was checked to fail with the mechanism off: with `PutGate.submit` returning its items at once (no
holding), `test_no_task_leaves_before_its_arguments_are_stored` fails on its first assertion (the tasks leave while
the object storage is not even running). With the failing put not failing its held tasks (`doomed` dropped in
`PutPipeline._carry_out`), `test_tasks_behind_a_put_that_cannot_be_stored_fail_with_the_storage_error` times out
waiting for the failures.
"""

from __future__ import annotations

import zlib
from typing import Any

from scaler import Client, SchedulerClusterCombo
from scaler.errors import ObjectStorageException
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.put_pipeline import PutPipeline
from scaler.payload.task_encoder import content_id
from scaler.protocol.ids import ObjectID
from tests.integration.conftest import Launcher, free_addresses, session_security, wait_for

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
