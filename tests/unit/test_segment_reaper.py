"""The segment directory's reaper decides whether a dead server's directory goes (segment_reaper.reap).

The process around it (a pipe's end of file after a SIGKILL) is tested with real servers in
tests/integration/test_shared_memory_objects.py.

With a spill directory, what no spill file has stays for a successor however late it comes, and the rest goes. Checked
with that off (`reap` called without the spill directory, as the reaper was started before): the first spill test
fails (the directory goes whole: the successor does not have the adopted object, and the adopt of the `.put` file is
refused).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from scaler.object_storage.segment_files import segment_name, segment_path, temporary_name, write_segment
from scaler.object_storage.segment_reaper import LOCK_FILE, reap, taken_over
from scaler.object_storage.spill_files import write_object_file
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import Adopt, StorageStatus
from tests.unit.test_adopt_sent_again import FRAMES, OBJECT, OWNER, Shell


def make_directory(tmp_path: Path, pid: int) -> Path:
    directory = tmp_path / "scaler-objects-0-abc"
    directory.mkdir()
    (directory / LOCK_FILE).write_text(f"{pid}\n")
    (directory / "00ff.obj").write_bytes(b"x" * 100)
    return directory


def test_a_dead_servers_directory_goes_whole(tmp_path: Path) -> None:
    directory = make_directory(tmp_path, 123)
    assert reap(str(directory), 123, grace_seconds=0.0)
    assert os.listdir(tmp_path) == []


def test_a_directory_whose_lock_is_held_stays(tmp_path: Path) -> None:
    """A successor holds the lock (it adopted the directory): the reaper leaves it."""
    directory = make_directory(tmp_path, 123)
    descriptor = os.open(directory / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert not reap(str(directory), 123, grace_seconds=0.0)
    finally:
        os.close(descriptor)
    assert sorted(os.listdir(directory)) == [LOCK_FILE, "00ff.obj"]


def test_a_successor_that_wrote_its_pid_within_the_grace_keeps_it(tmp_path: Path) -> None:
    directory = make_directory(tmp_path, 456)  # the successor (pid 456) took over from server 123
    assert taken_over(str(directory), 123) and not taken_over(str(directory), 456)
    assert not reap(str(directory), 123, grace_seconds=5.0)  # returns at once: the successor is there
    assert directory.exists()


def test_a_directory_already_gone_is_nothing_to_do(tmp_path: Path) -> None:
    assert not reap(str(tmp_path / "gone"), 123, grace_seconds=0.0)


def make_spilling_server_directories(tmp_path: Path) -> tuple[Path, Path]:
    """A killed server's spill directory and segment directory: an object on disk (its segment file a copy), an object
    adopted whose spill file was being written (a task's result its readers were told of), a file a peer wrote for
    adoption (its adopt not heard yet) and a temporary file."""
    spill = tmp_path / "spill"
    spill.mkdir()
    directory = make_directory(tmp_path, 123)
    os.unlink(directory / "00ff.obj")
    on_disk = ObjectID(b"object-on-disk")
    write_object_file(str(spill), on_disk, 1, OWNER, "", [memoryview(frame) for frame in FRAMES])
    write_segment(segment_path(str(directory), on_disk), on_disk, OWNER, "", FRAMES)
    write_segment(segment_path(str(directory), OBJECT), OBJECT, OWNER, "result", FRAMES)
    write_segment(str(directory / "peer-7.put"), ObjectID(b"object-put"), OWNER, "argument", FRAMES)
    write_segment(str(directory / temporary_name(on_disk, 5)), on_disk, OWNER, "", FRAMES)
    return spill, directory


def test_with_a_spill_directory_what_no_spill_file_has_stays_for_a_late_successor(tmp_path: Path) -> None:
    spill, directory = make_spilling_server_directories(tmp_path)
    assert not reap(str(directory), 123, grace_seconds=0.0, spill_directory=str(spill))
    assert sorted(os.listdir(directory)) == sorted([LOCK_FILE, segment_name(OBJECT), "peer-7.put"])
    successor = Shell(spill, directory)  # at the same address, long after the grace
    assert successor.get() == b"".join(FRAMES)  # the adopted object, written through by the successor
    adopt = Adopt(ObjectID(b"object-put"), OWNER, "peer-7.put", sum(map(len, FRAMES)), "argument")
    assert successor.call(adopt).answer.reply.status is StorageStatus.OK  # the adopt sent again finds its file
    successor.close()


def test_with_a_spill_directory_holding_every_object_the_directory_goes_whole(tmp_path: Path) -> None:
    spill, directory = make_spilling_server_directories(tmp_path)
    os.unlink(segment_path(str(directory), OBJECT))
    os.unlink(directory / "peer-7.put")
    assert reap(str(directory), 123, grace_seconds=0.0, spill_directory=str(spill))
    assert sorted(os.listdir(tmp_path)) == ["spill"]


def test_with_a_spill_directory_that_cannot_be_read_the_directory_goes_whole(tmp_path: Path) -> None:
    _, directory = make_spilling_server_directories(tmp_path)
    assert reap(str(directory), 123, grace_seconds=0.0, spill_directory=str(tmp_path / "gone"))
    assert sorted(os.listdir(tmp_path)) == ["spill"]
