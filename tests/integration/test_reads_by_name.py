"""A processor reads an object of 64 KiB and up from its storage's segment directory by name (issue 40, goal 3), with
a real object storage server process and connections of the roles a client and a processor use.

On the storage's host an object from `SEGMENT_FROM_BYTES` on is a file named after its id; a connection of a role that
may read every object (a processor) maps that file without a request to the server, and asks the server only when
there is no such file: the object is spilled (read back from disk), deleted (MissingObjects), or not stored.

Which requests the processor sent is seen from outside: the server is stopped (SIGSTOP) while the processor reads, so
a read that asked the server would wait for an answer and fail with the connection's timeout.

Checked by hand with each mechanism off (by editing the code, then restoring it):
- reading by name off (`connection.READS_BY_NAME` empty, the processor asks `getMapped` first):
  `test_a_processor_reads_an_object_without_a_request` fails (ObjectStorageException: no answer from the stopped
  server);
- the fallback off (`ObjectStorageConnection.get_frames` raising MissingObjects when a processor finds no file):
  `test_a_spilled_object_is_read_back_through_the_server` fails (MissingObjects for a spilled object);
- a deleted object's file left in place (`DiskWorker` not unlinking on `RemoveSegment`):
  `test_a_deleted_object_is_missing_not_read_from_a_stale_file` fails (the processor reads the deleted bytes).
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest

from scaler.errors import MissingObjects
from scaler.io.address import free_tcp_address
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.segment_directory import directory_name
from scaler.object_storage.segment_files import segment_path
from scaler.object_storage.store import SEGMENT_FROM_BYTES
from tests.integration.conftest import COLD_START_SECONDS, Launcher, Service, session_security, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KiB = 1024
TIMEOUT = 60.0
#: How long the processor's connection waits for an answer: only a read that (wrongly) asks the stopped server waits.
PROCESSOR_TIMEOUT = 10.0
OWNER = b"client-of-test-reads-by-name"


def block(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def storage(launcher: Launcher, *args: str) -> tuple[str, Service, str]:
    """A storage server, its address and its segment directory (in /dev/shm: the budgets here are small)."""
    address = free_tcp_address()
    server = launcher.start("scaler_object_storage_server", address, "-ll", "INFO", *args)
    server.wait_for_log("listening on", COLD_START_SECONDS)
    directory = os.path.join("/dev/shm", directory_name(address))
    assert os.path.isdir(directory), f"the server keeps no segment directory in /dev/shm:\n{server.log_text()}"
    return address, server, directory


def client_connection(address: str) -> ObjectStorageConnection:
    return ObjectStorageConnection(
        address, "client", timeout_seconds=TIMEOUT, security=session_security("client"), owner_id=OWNER
    )


def processor_connection(address: str) -> ObjectStorageConnection:
    """A connection as a processor opens it (worker/processor/process.py), greeted (it knows the segment directory)."""
    connection = ObjectStorageConnection(
        address, "processor", timeout_seconds=PROCESSOR_TIMEOUT, security=session_security("worker")
    )
    assert connection.local_segments() is not None, "the processor does not see the server's segment directory"
    return connection


def read(connection: ObjectStorageConnection, object_id: bytes) -> bytes:
    return b"".join(bytes(frame) for frame in connection.get_frames(object_id))


def test_a_processor_reads_an_object_without_a_request(launcher: Launcher) -> None:
    """Objects of 64 KiB and 100 KB (a U3 argument), put by a client (written by it and adopted), are read by a
    processor while the server is stopped: no request was sent for them."""
    address, server, directory = storage(launcher)
    objects = {b"at-the-limit": block(SEGMENT_FROM_BYTES, 1), b"u3-argument": block(100_000, 2)}
    with client_connection(address) as client, processor_connection(address) as processor:
        for object_id, payload in objects.items():
            client.put(object_id, payload, owner_id=OWNER)
            assert os.path.exists(segment_path(directory, object_id))
        os.kill(server.pid, signal.SIGSTOP)
        try:
            for object_id, payload in objects.items():
                assert read(processor, object_id) == payload
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert read(processor, b"u3-argument") == objects[b"u3-argument"]  # the server answers again


def test_a_deleted_object_is_missing_not_read_from_a_stale_file(launcher: Launcher) -> None:
    """A processor that read an object (and keeps its frames) reads it no more once its client deleted it: the file
    is gone when the delete is answered, so the processor asks the server, which says it is not stored. The frames it
    kept stay valid (a map outlives its file's name)."""
    address, _server, directory = storage(launcher)
    payload = block(100_000, 3)
    with client_connection(address) as client, processor_connection(address) as processor:
        client.put(b"deleted", payload, owner_id=OWNER)
        kept = processor.get_frames(b"deleted")
        assert client.delete([b"deleted"]) == 1
        with pytest.raises(MissingObjects):
            processor.get_frames(b"deleted")
        assert not os.path.exists(segment_path(directory, b"deleted"))
        assert b"".join(bytes(frame) for frame in kept) == payload


def test_a_spilled_object_is_read_back_through_the_server(launcher: Launcher, tmp_path: Path) -> None:
    """Objects put beyond the memory budget push the least recently used out of memory (its segment file is removed,
    its spill file stays): a processor finds no file for it, asks the server, and gets its bytes back."""
    address, _server, directory = storage(launcher, "--max-memory", "1MiB", "--spill-directory", str(tmp_path / "sp"))
    objects = {f"o{index}".encode(): block(300 * KiB, index) for index in range(8)}
    with client_connection(address) as client, processor_connection(address) as processor:
        for object_id, payload in objects.items():
            client.put(object_id, payload, owner_id=OWNER)
        wait_for(lambda: not os.path.exists(segment_path(directory, b"o0")), "the first object to leave memory")
        for object_id, payload in objects.items():
            assert read(processor, object_id) == payload, object_id
