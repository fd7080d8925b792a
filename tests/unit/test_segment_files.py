"""Segment files (object_storage/segment_files.py) and the choice of the segment directory (segment_directory.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from scaler.object_storage import segment_directory, segment_sight
from scaler.object_storage.segment_files import (
    ALIGN,
    MAX_NAME_BYTES,
    SegmentFileError,
    map_segment,
    read_head_of_file,
    scan_segment_directory,
    segment_name,
    segment_path,
    write_segment,
)
from scaler.protocol.storage_messages import SegmentDirectory

GiB = 1024**3


def test_a_segment_file_maps_back_as_the_frames_it_was_written_with_each_frame_aligned(tmp_path: Path) -> None:
    frames = [b"", b"a" * 3, b"b" * 64, bytearray(b"c" * 1000), memoryview(b"d" * 65)]
    path = str(tmp_path / "o.tmp")
    head = write_segment(path, b"object", b"Client|x", "argument", frames)
    mapped = map_segment(path, object_id=b"object")
    assert [bytes(frame) for frame in mapped.frames] == [bytes(frame) for frame in frames]
    assert all(offset % ALIGN == 0 for offset, _ in head.frames)
    assert (mapped.head.owner_id, mapped.head.name, mapped.head.total_bytes) == (b"Client|x", "argument", 1132)
    assert os.path.getsize(path) == head.file_bytes
    assert read_head_of_file(path) == head
    with pytest.raises(SegmentFileError, match="holds object"):
        map_segment(path, object_id=b"other")


def test_a_name_longer_than_the_header_holds_is_cut_there(tmp_path: Path) -> None:
    """An object's name only describes it: one of 70,000 characters (a long chain of graph calls was named after all of
    them) is stored cut to MAX_NAME_BYTES, at a character's boundary, and the object is stored all the same."""
    path = str(tmp_path / "o.tmp")
    name = "é" * 70_000  # two bytes each: the cut falls inside the last character that would fit
    head = write_segment(path, b"object", b"Client|x", name, [b"payload"])
    mapped = map_segment(path, object_id=b"object")
    assert bytes(mapped.frames[0]) == b"payload"
    assert mapped.head.name == head.name == "é" * (MAX_NAME_BYTES // 2)


def test_a_mapped_segment_is_read_only_and_a_copy_on_write_one_is_written_privately(tmp_path: Path) -> None:
    """Read-only by default; a copy-on-write map takes writes without changing the file or another map of it."""
    path = str(tmp_path / "o.obj")
    write_segment(path, b"object", b"", "", [b"x" * 10_000])
    shared = map_segment(path)
    with pytest.raises(TypeError):
        shared.frames[0][0] = ord("y")
    private = map_segment(path, copy_on_write=True)
    private.frames[0][0] = ord("y")
    assert bytes(private.frames[0][:2]) == b"yx"
    assert bytes(shared.frames[0][:2]) == b"xx"
    assert bytes(map_segment(path).frames[0][:2]) == b"xx"
    with open(path, "rb") as file:
        assert b"y" not in file.read()


def test_a_torn_or_foreign_file_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "o.obj")
    write_segment(path, b"object", b"", "", [b"x" * 200])
    os.truncate(path, os.path.getsize(path) - 1)
    with pytest.raises(SegmentFileError, match="torn"):
        map_segment(path)
    (tmp_path / "junk.obj").write_bytes(b"not a segment file at all")
    with pytest.raises(SegmentFileError, match="not a segment file"):
        map_segment(str(tmp_path / "junk.obj"))


def test_the_scan_adopts_whole_files_and_removes_what_a_stopped_server_left_unfinished(tmp_path: Path) -> None:
    directory = str(tmp_path)
    write_segment(segment_path(directory, b"kept"), b"kept", b"Client|a", "n", [b"k" * 100])
    write_segment(segment_path(directory, b"torn"), b"torn", b"", "", [b"t" * 100])
    os.truncate(segment_path(directory, b"torn"), 50)
    write_segment(str(tmp_path / "6b.7.tmp"), b"half", b"", "", [b"h"])
    write_segment(str(tmp_path / "a-peer-wrote-it.put"), b"put", b"", "", [b"p"])
    write_segment(str(tmp_path / segment_name(b"other")), b"renamed", b"", "", [b"r"])
    scan = scan_segment_directory(directory)
    found = [(found.object_id, found.owner_id, found.total_bytes) for found in scan.found]
    assert found == [(b"kept", b"Client|a", 100)]
    assert sorted(os.path.basename(path) for path, _ in scan.discarded) == sorted(
        [segment_name(b"torn"), "6b.7.tmp", segment_name(b"other")]
    )
    assert sorted(os.listdir(directory)) == sorted([segment_name(b"kept"), "a-peer-wrote-it.put"])


# ---------------------------------------------------------------- the directory


def test_dev_shm_is_used_when_it_holds_half_the_budget_and_the_fallback_is_taken_and_said_otherwise() -> None:
    """Docker's 64 MB /dev/shm against a budget of 4 GiB: the temporary directory, with a warning naming both sizes
    and what to change; a /dev/shm with room: it, quietly."""
    roomy = segment_directory.choose_parent(None, 4 * GiB, lambda _: 3 * GiB, lambda _: True, fallback="/var/tmp")
    assert (roomy.parent, roomy.shared_memory, roomy.warning) == ("/dev/shm", True, False)
    small = segment_directory.choose_parent(None, 4 * GiB, lambda _: 64 * 1024**2, lambda _: False, fallback="/var/tmp")
    assert (small.parent, small.shared_memory, small.warning) == ("/var/tmp", False, True)
    assert "/dev/shm (the default, /dev/shm) has 64 MiB free" in small.text
    assert "4 GiB" in small.text and "--shm-size" in small.text and "--shared-memory-directory" in small.text
    missing = segment_directory.choose_parent("/no/such", GiB, lambda _: None, lambda _: False, fallback="/var/tmp")
    assert missing.warning and "/no/such (--shared-memory-directory) does not exist" in missing.text


def test_a_directory_is_named_after_its_address_locked_and_seen_only_by_who_sees_the_same_one(tmp_path: Path) -> None:
    directory, lock, note = segment_directory.open_segment_directory(str(tmp_path), "tcp://127.0.0.1:1234")
    try:
        assert note == ""
        assert directory == os.path.join(str(tmp_path), segment_directory.directory_name("tcp://127.0.0.1:1234"))
        with pytest.raises(segment_directory.SpillDirectoryError, match="in use by another object storage server"):
            segment_directory.open_segment_directory(str(tmp_path), "tcp://127.0.0.1:1234")
        described = segment_directory.describe(directory, False)
        assert segment_sight.sees(described)
        stats = os.stat(str(tmp_path))
        parent = SegmentDirectory(directory, described.boot_id, stats.st_dev, stats.st_ino, False)
        assert not segment_sight.sees(parent)
        assert not segment_sight.sees(
            SegmentDirectory(directory, "another-boot", described.device, described.inode, False)
        )
    finally:
        os.close(lock)


def test_files_of_another_boot_are_discarded_when_the_directory_is_adopted(tmp_path: Path) -> None:
    directory, lock, _ = segment_directory.open_segment_directory(str(tmp_path), "tcp://127.0.0.1:1")
    write_segment(segment_path(directory, b"old"), b"old", b"", "", [b"o"])
    os.close(lock)
    Path(directory, segment_directory.BOOT_FILE).write_text("an-earlier-boot\n")
    directory, lock, note = segment_directory.open_segment_directory(str(tmp_path), "tcp://127.0.0.1:1")
    os.close(lock)
    assert note == "discarded 1 file(s) written before the machine restarted"
    assert not os.path.exists(segment_path(directory, b"old"))


def test_the_directories_of_servers_that_died_long_ago_are_swept_and_no_other(tmp_path: Path) -> None:
    parent = str(tmp_path)
    live, live_lock, _ = segment_directory.open_segment_directory(parent, "tcp://live:1")
    dead, dead_lock, _ = segment_directory.open_segment_directory(parent, "tcp://dead:1")
    recent, recent_lock, _ = segment_directory.open_segment_directory(parent, "tcp://recent:1")
    os.close(dead_lock)
    os.close(recent_lock)
    old = time.time() - segment_directory.STALE_SECONDS - 10
    os.utime(os.path.join(dead, segment_directory.LOCK_FILE), (old, old))
    os.utime(os.path.join(live, segment_directory.LOCK_FILE), (old, old))  # old, but its server holds the lock
    own = os.path.join(parent, "scaler-objects-own")
    try:
        assert segment_directory.sweep_stale(parent, own) == [dead]
        assert os.path.isdir(live) and os.path.isdir(recent) and not os.path.exists(dead)
    finally:
        os.close(live_lock)
