"""Objects in shared memory on each host (issue 40, goal 1), with real processes.

The object storage server keeps objects from 64 KiB on as segment files in its segment directory (/dev/shm by
default); processors of its host map them instead of receiving a copy each, so a numpy array built on an object's
frames (pickle protocol 5 buffers) lies in the map: read-only and shared by default, private and writable with
`copy_on_write`. These tests look at where a task's array really lies (/proc/self/maps of the processor) and at what
is left in the directory's parent when the server goes.

Checked by hand with each mechanism off:
- mapping off (`local_segments.local_segments` returning None): the arrays lie in anonymous memory (the bytes
  received over the socket): `test_processors_map_one_copy_of_an_object` and `test_the_fallback_directory_is_used_
  and_said` fail;
- the fallback off (`segment_directory.choose_parent` always taking /dev/shm): `test_the_fallback_..._said` fails (no
  warning, the segment directory is not in the temporary directory);
- the reaper off (SCALER_SEGMENT_REAPER=0): `test_a_killed_server_leaves_no_segment_directory` fails (the directory
  of the killed server stays).
- the processor's check that a cached (mapped) object still exists off (`TaskDecoder._object`):
  `test_a_mapped_object_after_clear_...` fails (the task reads the cleared object's old map).
- the client's read-only maps off (`ResultReader._frames` and `Session.read` asking `copy_on_write=True`, as before
  issue 40's client side): `test_the_client_reads_results_and_objects_read_only_...` fails (the arrays it reads are
  writable); the client's read by name off (`ObjectStorageConnection.get_frames` asking `getMapped` first) changes
  no outcome here (it saves a round trip: benchmarks/shared_memory.py).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from scaler import Client, copy_on_write
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.segment_directory import directory_name
from tests.integration.conftest import (
    COLD_START_SECONDS,
    Launcher,
    free_addresses,
    session_security,
    wait_for,
    wait_for_workers,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MiB = 1024 * 1024
TIMEOUT = 60.0


# ---------------------------------------------------------------- what runs in the processors


def mapping_of(array: Any) -> str:
    """The file the memory of `array` is mapped from, as /proc/self/maps names it ("" for anonymous memory)."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            start, end = (int(part, 16) for part in fields[0].split("-"))
            if start <= address < end:
                return fields[5].strip() if len(fields) == 6 else ""
    return ""


def where_is(array: Any) -> tuple[str, bool, float]:
    """Where the task's argument lies, whether the task may write it, and its sum."""
    return mapping_of(array), bool(array.flags.writeable), float(array.sum())


def write_first(array: Any) -> tuple[str, float]:
    """Write the argument (only possible on a copy-on-write view), then say where it lies and what it holds."""
    array[0] = -1.0
    return mapping_of(array), float(array[0])


def make_array(count: int) -> Any:
    import numpy

    return numpy.arange(count, dtype=numpy.float64)


# ---------------------------------------------------------------- helpers


def segment_directory_of(storage_address: str, parent: str = "/dev/shm") -> str:
    """The server's segment directory under `parent` (named after its address), which must exist."""
    directory = os.path.join(parent, directory_name(storage_address))
    assert os.path.isdir(directory), f"{directory} does not exist: {os.listdir(parent)}"
    return directory


def start_stack(launcher: Launcher, workers: int, *storage_args: str, env: dict[str, str] | None = None) -> Any:
    addresses = free_addresses()
    storage = launcher.start(
        "scaler_object_storage_server", addresses.object_storage, "-ll", "INFO", *storage_args, env=env
    )
    storage.wait_for_log("listening on", COLD_START_SECONDS)
    launcher.scheduler(addresses)
    if workers:
        launcher.cluster(addresses.scheduler, workers, "-his", "0.5")
        wait_for_workers(addresses.monitor, workers, COLD_START_SECONDS)
    return addresses, storage


# ---------------------------------------------------------------- the tests


def test_processors_map_one_copy_of_an_object(launcher: Launcher) -> None:
    """Two processors read one 8 MiB array sent once: both see it in the server's segment file (read-only), and an
    argument passed by value is mapped the same way; with `copy_on_write` a task writes its own private view, which
    neither the object nor the next task sees."""
    numpy = pytest.importorskip("numpy")
    addresses, _storage = start_stack(launcher, 2)
    directory = segment_directory_of(addresses.object_storage)
    array = numpy.arange(MiB, dtype=numpy.float64)  # 8 MiB
    expected = float(array.sum())
    with Client(address=addresses.scheduler) as client:
        reference = client.send_object(array)
        places = [client.submit(where_is, reference) for _ in range(8)]
        for future in places:
            path, writable, total = future.result(TIMEOUT)
            assert path.startswith(directory + "/") and path.endswith(".obj"), path
            assert (writable, total) == (False, expected)
        by_value = client.submit(where_is, array + 1).result(TIMEOUT)
        assert by_value[0].startswith(directory + "/") and by_value[1:] == (False, expected + len(array))
        written = client.submit(write_first, copy_on_write(reference)).result(TIMEOUT)
        assert written[0].startswith(directory + "/") and written[1] == -1.0
        again = client.submit(where_is, reference).result(TIMEOUT)
        assert again == (places[0].result()[0], False, expected)  # nobody else saw the write


def test_the_fallback_directory_is_used_and_said(launcher: Launcher, tmp_path: Path) -> None:
    """A budget that /dev/shm cannot hold half of (Docker's 64 MB, here a budget over twice its free space) puts the
    segment directory in the temporary directory, with a warning naming the sizes and what to change; processors
    still map their objects from there."""
    numpy = pytest.importorskip("numpy")
    shm = os.statvfs("/dev/shm")
    budget = 2 * shm.f_bavail * shm.f_frsize + 1024 * MiB
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    addresses, storage = start_stack(launcher, 1, "--max-memory", str(budget), env={"TMPDIR": str(temporary)})
    log = storage.log_text()  # the choice is logged before the server listens
    assert "less than half the memory budget" in log and "--shm-size" in log, log
    directory = segment_directory_of(addresses.object_storage, str(temporary))
    with Client(address=addresses.scheduler) as client:
        reference = client.send_object(numpy.ones(MiB // 8))
        path, writable, total = client.submit(where_is, reference).result(TIMEOUT)
    assert path.startswith(directory + "/") and not writable and total == MiB // 8


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_server_leaves_no_segment_directory(launcher: Launcher, tmp_path: Path, signum: int) -> None:
    """A server killed (SIGKILL: it cannot clean up) or stopped (SIGTERM) leaves nothing in the parent of its segment
    directory: its reaper, a process of its own session, removes the directory once the server is gone."""
    parent = tmp_path / "shm"
    parent.mkdir()
    addresses = free_addresses()
    # a small budget: the parent (on the test's disk) must have half of it free, or the server falls back to TMPDIR
    storage = launcher.object_storage(
        addresses.object_storage, "--shared-memory-directory", str(parent), "--max-memory", "256MiB"
    )
    storage.wait_for_log("listening on", COLD_START_SECONDS)
    directory = segment_directory_of(addresses.object_storage, str(parent))
    with ObjectStorageConnection(
        addresses.object_storage, "scheduler", timeout_seconds=TIMEOUT, security=session_security("server")
    ) as connection:
        connection.put(b"o" * 16, os.urandom(MiB))
        assert bytes(connection.get(b"o" * 16))[:0] == b""
    assert any(name.endswith(".obj") for name in os.listdir(directory)), os.listdir(directory)
    storage.popen.send_signal(signum)
    storage.wait_exit()
    wait_for(lambda: not os.listdir(parent), f"{parent} to be empty (it holds {os.listdir(parent)})", TIMEOUT)


def die_holding(array: Any) -> None:
    """Map the object, then die without cleaning up (as a processor killed in the middle of a task)."""
    assert mapping_of(array)
    os._exit(9)


def test_a_mapped_object_after_clear_and_after_a_processor_dies_holding_it(launcher: Launcher) -> None:
    """A processor that dies while it maps an object harms neither the object nor the next reader; after `clear()`
    the object is gone for every processor, even those that hold it mapped in their cache (a task reading it fails
    with MissingObjects, not with the old bytes)."""
    numpy = pytest.importorskip("numpy")
    from scaler.errors import MissingObjects, ProcessorDiedError

    addresses, _storage = start_stack(launcher, 1)
    directory = segment_directory_of(addresses.object_storage)
    array = numpy.arange(MiB // 8, dtype=numpy.float64)
    with Client(address=addresses.scheduler) as client:
        reference = client.send_object(array)
        assert client.submit(where_is, reference).result(TIMEOUT)[1:] == (False, float(array.sum()))
        with pytest.raises(ProcessorDiedError):
            client.submit(die_holding, reference).result(TIMEOUT)
        path, _writable, summed = client.submit(where_is, reference).result(TIMEOUT)
        assert path.startswith(directory + "/") and summed == float(array.sum())
        client.clear()
        wait_for(lambda: not any(name.endswith(".obj") for name in os.listdir(directory)), "the object's file to go")
        with pytest.raises(MissingObjects):
            client.submit(where_is, reference).result(TIMEOUT)


def test_the_client_reads_results_and_objects_read_only_without_a_copy(launcher: Launcher) -> None:
    """On the storage's host the client reads as processors do: a result's array and a stored object's array are
    read-only views of the object's segment file (writing one raises), and outlive the object's file (the result is
    deleted once read; `clear()` deletes the object: new reads fail, the view already read stays whole). A reference
    marked `copy_on_write()` gives a private writable view, whose writes nobody else sees. Another reader (a task,
    the client again) still reads the object after the client dropped its view."""
    pytest.importorskip("numpy")
    from scaler.errors import MissingObjects

    addresses, _storage = start_stack(launcher, 1)
    directory = segment_directory_of(addresses.object_storage)
    count = MiB // 8 * 8  # 8 MiB of float64
    expected = float(make_array(count).sum())
    with Client(address=addresses.scheduler) as client:
        result = client.submit(make_array, count).result(TIMEOUT)
        assert mapping_of(result).startswith(directory + "/") and not result.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            result[0] = -1.0
        wait_for(lambda: not any(name.endswith(".obj") for name in os.listdir(directory)), "the result's file to go")
        assert float(result.sum()) == expected  # its file is unlinked, its map lives with the array

        reference = client.send_object(make_array(count))
        read = client.session.read(reference)
        assert mapping_of(read).startswith(directory + "/") and not read.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            read[0] = -1.0
        writable = client.session.read(reference.copy_on_write())
        assert mapping_of(writable).startswith(directory + "/") and writable.flags.writeable
        writable[0] = -1.0
        assert read[0] == 0.0 and float(client.session.read(reference)[0]) == 0.0  # nobody else saw the write
        del read, writable
        assert client.submit(where_is, reference).result(TIMEOUT)[2] == expected
        kept = client.session.read(reference)
        assert float(kept.sum()) == expected
        client.clear()
        wait_for(lambda: not any(name.endswith(".obj") for name in os.listdir(directory)), "the object's file to go")
        with pytest.raises(MissingObjects):
            client.session.read(reference)
        assert float(kept.sum()) == expected and kept[1] == 1.0
