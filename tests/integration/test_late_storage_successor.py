"""A storage server with a spill directory, SIGKILLed, and its successor started past the reaper's grace (5 s), with
real processes: what the dead server was storing and no spill file has is still taken over by the successor.

A file a peer wrote for adoption in the segment directory (its adopt not heard yet when the server died) is left by
the reaper, so the adopt the peer sends again to the successor finds it; an object a spill file has loses its segment
file (a copy), and the successor reads it from the spill file.

Checked with the mechanism off (the server starting its reaper without its spill directory, as before): the adopt sent
to the successor is refused ("badRequest ... peer-late.put in the segment directory: No such file or directory").
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.segment_directory import directory_name
from scaler.object_storage.segment_files import segment_path, write_segment
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import Adopt
from tests.integration.conftest import COLD_START_SECONDS, Launcher, free_addresses, session_security, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MiB = 1024 * 1024
TIMEOUT = 60.0
SPILLED = ObjectID(b"s" * 16)
UNHEARD = ObjectID(b"u" * 16)


def connect(address: str) -> ObjectStorageConnection:
    return ObjectStorageConnection(address, "scheduler", timeout_seconds=TIMEOUT, security=session_security("server"))


def test_a_successor_past_the_grace_takes_over_what_its_killed_predecessor_had_not_spilled(
    launcher: Launcher, tmp_path: Path
) -> None:
    parent, spill = tmp_path / "shm", tmp_path / "spill"
    parent.mkdir()
    addresses = free_addresses()
    # a small budget: the parent (on the test's disk) must have half of it free, or the server falls back to TMPDIR
    arguments = ("--shared-memory-directory", str(parent), "--max-memory", "256MiB", "--spill-directory", str(spill))
    storage = launcher.object_storage(addresses.object_storage, *arguments)
    storage.wait_for_log("listening on", COLD_START_SECONDS)
    directory = os.path.join(parent, directory_name(addresses.object_storage))
    spilled, unheard = os.urandom(MiB), os.urandom(MiB)
    with connect(addresses.object_storage) as connection:
        connection.put(SPILLED, spilled)  # answered: written through to its spill file
    write_segment(os.path.join(directory, "peer-late.put"), UNHEARD, b"", "argument", [unheard])
    assert os.path.exists(segment_path(directory, SPILLED))
    storage.popen.send_signal(signal.SIGKILL)
    storage.wait_exit()
    # the reaper, past its grace, removes the segment file of the spilled object (with the directory, without the spill
    # directory)
    wait_for(lambda: not os.path.exists(segment_path(directory, SPILLED)), "the reaper to act", TIMEOUT)

    successor = launcher.object_storage(addresses.object_storage, *arguments)
    successor.wait_for_log("listening on", COLD_START_SECONDS)
    with connect(addresses.object_storage) as connection:
        connection.call(Adopt(UNHEARD, b"", "peer-late.put", len(unheard), "argument"))  # the peer's adopt sent again
        assert bytes(connection.get(UNHEARD)) == unheard
        assert bytes(connection.get(SPILLED)) == spilled
