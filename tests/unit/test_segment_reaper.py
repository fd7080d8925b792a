"""The segment directory's reaper decides whether a dead server's directory goes (segment_reaper.reap).

The process around it (a pipe's end of file after a SIGKILL) is tested with real servers in
tests/integration/test_shared_memory_objects.py.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from scaler.object_storage.segment_reaper import LOCK_FILE, reap, taken_over


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
