"""A reader far from the object storage follows a large object while a peer of the server's host writes it (issue 42:
a task's 100 MB result crosses a laptop's link while the processor is still writing it, instead of after).

A real server (in a thread of this process, its write-stall sweep short), a writer on its host (`FollowedPuts`, as a
processor's connection runs it) and a reader that does not map objects (getInParts, as a laptop's client reads a
result): the reader gets pieces of the object while its adopt is held back, and the whole object once it is stored; a
writer killed mid-write has its waiting reader answered "not stored" (naming why) by the server's sweep, not left to
hang.

Checked by hand with the mechanism off: with `StorageService._get` without its branch for objects being written, the
first test's read fails at once ("is not stored"); with the server's sweep not ending stalled writes
(`FollowedWrites.sweep` returning nothing), the second test's reader waits until the test's timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.config.sections import ObjectStorageServerConfig
from scaler.errors import MissingObjects
from scaler.io.address import free_tcp_address
from scaler.object_storage.connection import ObjectInParts, ObjectStorageConnection
from scaler.object_storage.followed_put import FollowedPuts
from scaler.object_storage.server import serve
from scaler.payload.serializer import DefaultSerializer, serialize_to_frames
from scaler.protocol.storage_messages import WIRE_PIECE_BYTES, Adopt, StorageOperation

pytestmark = pytest.mark.integration

OWNER = b"Client|laptop-test"
RESULT = b"r" * 32


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[str]:
    """A server in a thread of this test (plain TCP, segments under `tmp_path`) whose sweep ends writes stalled for
    2 to 4 s; its address."""
    address = free_tcp_address()
    config = ObjectStorageServerConfig(bind_address=address, shared_memory_directory=str(tmp_path))
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def run() -> None:
        loop.run_until_complete(serve(config, ready=lambda _: ready.set(), stop=stop, write_stall_seconds=2.0))

    thread = threading.Thread(target=run, name="storage-server", daemon=True)
    thread.start()
    assert ready.wait(30), "the server did not start"
    try:
        yield address
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()


def _read(connection: ObjectStorageConnection, seen: threading.Event) -> bytes:
    """The object read in parts; `seen` is set once more than two pieces came."""

    def consume(source: ObjectInParts) -> bytes:
        got = bytearray()
        chunk = memoryview(bytearray(WIRE_PIECE_BYTES))
        while count := source.readinto(chunk):
            got += chunk[:count]
            if len(got) > 2 * WIRE_PIECE_BYTES:
                seen.set()
        return bytes(got)

    return connection.read_in_parts(RESULT, consume)


@pytest.mark.timeout(60)
def test_a_far_reader_gets_pieces_of_an_object_before_it_is_stored_and_all_of_it_once_stored(storage: str) -> None:
    writer = ObjectStorageConnection(storage, "processor", timeout_seconds=30)
    far = ObjectStorageConnection(storage, "client", owner_id=OWNER, map_local=False, timeout_seconds=30)
    near = ObjectStorageConnection(storage, "client", owner_id=OWNER, timeout_seconds=30)
    read_some = threading.Event()

    def held_adopt(operation: StorageOperation) -> object:
        """The writer's requests; its adopt only once the reader has read pieces of the object."""
        if isinstance(operation, Adopt):
            assert read_some.wait(30), "the reader got no piece before the object was stored"
        return writer.call(operation)

    value = os.urandom(12 * WIRE_PIECE_BYTES + 5)
    frames = serialize_to_frames(DefaultSerializer(), value)
    followed = FollowedPuts(held_adopt, writer.close)
    try:
        local = writer.local_segments()
        assert local is not None, "the writer is on the server's host"
        assert followed.start(local, RESULT, OWNER, "result", frames)
        assert near.exists(RESULT), "announced while it is written: a read waits for it"
        got = _read(far, read_some)
        assert got.endswith(value) and len(got) == sum(len(frame) for frame in frames)
        assert near.exists(RESULT)
        assert bytes(near.get_frames(RESULT)[1]) == value, "a reader on the host maps the object as stored"
    finally:
        followed.close()
        far.close()
        near.close()


WRITER_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from scaler.object_storage.connection import ObjectStorageConnection
    from scaler.object_storage.followed_put import FollowedPuts
    from scaler.protocol.storage_messages import WriteProgress

    writer = ObjectStorageConnection(sys.argv[1], "processor", timeout_seconds=30)
    progress = []

    def call(operation):
        if isinstance(operation, WriteProgress):
            progress.append(operation)
            if len(progress) == 2:  # mid-write: say so and wait to be killed
                print("mid-write", flush=True)
                threading.Event().wait()
        return writer.call(operation)

    followed = FollowedPuts(call, writer.close)
    assert followed.start(writer.local_segments(), b"r" * 32, b"Client|laptop-test", "result", [bytes(40 << 20)])
    print("begun", flush=True)
    threading.Event().wait()
    """
)


@pytest.mark.timeout(60)
def test_a_writer_killed_mid_write_has_its_waiting_reader_told_the_object_was_not_stored(storage: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, storage], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    far = ObjectStorageConnection(storage, "client", owner_id=OWNER, map_local=False, timeout_seconds=120)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline().strip() for _ in range(2)]
        assert sorted(lines) == ["begun", "mid-write"], lines
        outcome: list[BaseException | bytes] = []
        following = threading.Event()
        reader = threading.Thread(target=lambda: outcome.append(_catch(lambda: _read(far, following))), daemon=True)
        reader.start()
        assert following.wait(30), f"the reader got no piece of the object being written: {outcome}"
        process.kill()
        process.wait(30)
        reader.join(50)
        assert outcome, "the reader is still waiting"
        (error,) = outcome
        assert isinstance(error, MissingObjects), error
        assert "was not stored" in str(error) and "stopped mid-write" in str(error)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        if process.stdout is not None:
            process.stdout.close()
        far.close()


def _catch(read: object) -> BaseException | bytes:
    try:
        return read()  # type: ignore[operator, no-any-return]
    except BaseException as error:
        return error


def _large(size: int) -> bytes:
    """A task's large result: `bytes` (read-only, so its processor writes it while readers follow)."""
    return bytes(range(256)) * (size // 256)


@pytest.mark.timeout(120)
def test_a_far_client_gets_a_large_result_of_a_cluster_announcing_results_while_written(
    make_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end (the processor announces a large result on its link once its write has begun, and says it is still
    writing): a client off the storage's host reads the result in parts and gets it whole, one result after another
    from the same processor. Guards the pieces together (the processor's link, the reads waiting at the server); the
    mechanisms are checked to fail when off by the tests above and below and by tests/unit/test_followed_writes.py and
    tests/unit/worker/test_processor_link.py."""
    from scaler import Client
    from scaler.object_storage import local_segments

    monkeypatch.setattr(local_segments, "sees", lambda directory: False)  # this client as if on another host
    monkeypatch.setattr(local_segments, "_seen", {})
    cluster = make_cluster(1)
    size = 24 << 20
    with Client(cluster.get_address(), **cluster.client_keys) as client:
        for _ in range(3):
            future = client.submit(_large, size)
            assert future.result(60) == _large(size)


def _large_held(size: int, gate: str, pid_file: str = "") -> bytes:
    """`_large`, whose write in this processor (its followed write's thread) waits until the file `gate` exists (at
    most 100 s); `pid_file`: where this processor's pid is written."""
    from scaler.object_storage import followed_put

    original = followed_put.FollowedPuts._write

    def held(self: followed_put.FollowedPuts, job: Any) -> None:
        followed_put.FollowedPuts._write = original  # type: ignore[method-assign]
        deadline = time.monotonic() + 100
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
        original(self, job)

    followed_put.FollowedPuts._write = held  # type: ignore[method-assign]
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    return _large(size)


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@pytest.mark.timeout(150)
def test_a_large_result_is_announced_while_it_is_written(make_cluster: Any, tmp_path: Path) -> None:
    """The processor's TaskResult leaves on its link once the write of its large result has begun, so the client's
    future is done (and its fetch may follow the write) while the write is held back; the result read afterwards is
    whole.

    Checked by hand with the mechanism off (the outlet waiting for `storage.writing()` to turn false before it sends a
    task's end): the future is not done while the write is held, and the test fails at its first assertion."""
    from scaler import Client

    cluster = make_cluster(1)
    gate = tmp_path / "gate"
    size = 24 << 20
    with Client(cluster.get_address(), **cluster.client_keys) as client:
        future = client.submit(_large_held, size, str(gate))
        done, _ = concurrent.futures.wait([future], timeout=60)
        gate.touch()
        assert done, "the result was announced only once it was written"
        assert future.result(60) == _large(size)
        again = client.submit(_large, size)  # the same processor, once its write is done
        assert again.result(60) == _large(size)
