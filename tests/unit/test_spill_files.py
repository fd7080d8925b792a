"""Spill files on a real (temporary) directory: the format round-trips, a file cut short or corrupted is never
served, an unfinished write is discarded, the directory is locked against a second server.

Checked by switching the checks off: without the size and trailer checks of `_read_description`, the torn files are
found as objects; without the CRC comparison in `read_object_file`, the flipped byte is served.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaler.object_storage.spill_files import (
    MAP_FROM_BYTES,
    FoundObject,
    SpillDirectoryError,
    SpillFileError,
    lock_spill_directory,
    object_path,
    read_object_file,
    scan_spill_directory,
    write_object_file,
)
from scaler.protocol.storage_messages import CHUNK_BYTES

OWNER = b"Client|alice"


def _write(directory: Path, object_id: bytes, generation: int, payload: list[bytes], name: str = "n") -> str:
    write_object_file(str(directory), object_id, generation, OWNER, name, [memoryview(p) for p in payload])
    return object_path(str(directory), object_id, generation)


@pytest.mark.parametrize("size", [0, 10, MAP_FROM_BYTES + 3])
def test_an_object_round_trips_and_is_found_with_its_owner_and_name(tmp_path: Path, size: int) -> None:
    payload = os.urandom(size)
    path = _write(tmp_path, b"\x01id", 5, [payload[: size // 3], payload[size // 3 :]], "result é")
    assert os.stat(path).st_mode & 0o777 == 0o600
    frames = read_object_file(str(tmp_path), b"\x01id", 5, size)
    assert b"".join(bytes(frame) for frame in frames) == payload
    scan = scan_spill_directory(str(tmp_path))
    assert scan.found == [FoundObject(b"\x01id", OWNER, "result é", size, 5)]
    assert scan.discarded == []


def test_a_long_object_id_gets_a_hashed_file_name_and_is_still_found(tmp_path: Path) -> None:
    object_id = b"x" * 300
    path = _write(tmp_path, object_id, 1, [b"abc"])
    assert len(os.path.basename(path)) < 100
    assert [found.object_id for found in scan_spill_directory(str(tmp_path)).found] == [object_id]


def test_frames_of_a_large_object_are_chunked_on_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("scaler.object_storage.spill_files.CHUNK_BYTES", MAP_FROM_BYTES)
    payload = os.urandom(2 * MAP_FROM_BYTES + 1)
    _write(tmp_path, b"big", 1, [payload])
    frames = read_object_file(str(tmp_path), b"big", 1, len(payload))
    assert [len(frame) for frame in frames] == [MAP_FROM_BYTES, MAP_FROM_BYTES, 1]
    assert CHUNK_BYTES > MAP_FROM_BYTES


def test_torn_unfinished_foreign_and_superseded_files_at_start(tmp_path: Path) -> None:
    good = _write(tmp_path, b"good", 1, [b"payload"])
    truncated = _write(tmp_path, b"cut", 2, [b"x" * 100])
    with open(truncated, "r+b") as file:
        file.truncate(60)
    no_trailer = _write(tmp_path, b"tail", 3, [b"y" * 50])
    with open(no_trailer, "r+b") as file:
        file.seek(-4, os.SEEK_END)
        file.write(b"\0\0\0\0")
    unfinished = tmp_path / f"{b'tmp'.hex()}.4.tmp"
    unfinished.write_bytes(b"SCALOBJ1 half")
    older = _write(tmp_path, b"twice", 5, [b"old"])
    newer = _write(tmp_path, b"twice", 6, [b"new!"])
    (tmp_path / "notes.txt").write_text("left alone")
    scan = scan_spill_directory(str(tmp_path))
    assert sorted((found.object_id, found.generation) for found in scan.found) == [(b"good", 1), (b"twice", 6)]
    why = {os.path.basename(path): reason for path, reason in scan.discarded}
    assert "torn" in why[os.path.basename(truncated)]
    assert "trailer" in why[os.path.basename(no_trailer)]
    assert "unfinished write" in why[unfinished.name]
    assert "superseded" in why[os.path.basename(older)]
    remaining = sorted(os.listdir(tmp_path))
    assert remaining == sorted([os.path.basename(good), os.path.basename(newer), "notes.txt"])


@pytest.mark.parametrize("size", [100, MAP_FROM_BYTES + 100])
def test_a_corrupted_payload_is_refused_on_read_back(tmp_path: Path, size: int) -> None:
    path = _write(tmp_path, b"rot", 1, [b"z" * size])
    with open(path, "r+b") as file:
        file.seek(size // 2 + 40)
        file.write(b"Z")
    with pytest.raises(SpillFileError, match="checksum"):
        read_object_file(str(tmp_path), b"rot", 1, size)


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write

    def full_disk(descriptor: int, data: bytes | memoryview) -> int:
        if len(data) > 1000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        _write(tmp_path, b"id", 1, [b"x" * 5000])
    assert os.listdir(tmp_path) == []


def test_the_directory_is_created_private_and_locked_against_a_second_server(tmp_path: Path) -> None:
    directory = tmp_path / "spill"
    lock = lock_spill_directory(str(directory))
    try:
        assert directory.stat().st_mode & 0o777 == 0o700
        other = subprocess.run(
            [sys.executable, "-c", "import sys; from scaler.object_storage.spill_files import lock_spill_directory\n"
             "try:\n    lock_spill_directory(sys.argv[1])\nexcept Exception as e:\n    print(e)", str(directory)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert f"in use by another object storage server (pid {os.getpid()})" in other.stdout
    finally:
        os.close(lock)
    os.close(lock_spill_directory(str(directory)))  # free again once its holder let go
    with pytest.raises(SpillDirectoryError):
        lock_spill_directory(str(tmp_path / "spill" / ".lock" / "below-a-file"))
