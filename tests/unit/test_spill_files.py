"""Spill files on a real (temporary) directory: the format round-trips, a file cut short or corrupted is never
served, an unfinished write is discarded, the directory is locked against a second server.

Checked by switching the checks off: without the size and trailer checks of `_read_description`, the torn files are
found as objects; without the CRC comparison in `read_object_file`, the flipped byte is served.
"""

from __future__ import annotations

import errno
import os
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.object_storage.spill_files import (
    END_MAGIC,
    MAGIC,
    MAGIC_V1,
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
HEADER_BYTES = 26  #: magic, payload bytes, id / owner / name lengths, frame count


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


@pytest.mark.parametrize("size", [10, MAP_FROM_BYTES + 3])
def test_the_frames_come_back_as_they_were_put(tmp_path: Path, size: int) -> None:
    """A large `bytes` object is a marker frame, then its bytes: a reader that got one joined frame back (what the
    first format served) could not tell it from a pickle (issue 38: "invalid load key, '\\x00'")."""
    frames = [b"\x00scaler:raw-bytes", os.urandom(size), b"", b"tail"]
    _write(tmp_path, b"raw", 3, frames)
    read = read_object_file(str(tmp_path), b"raw", 3, sum(len(frame) for frame in frames))
    assert [bytes(frame) for frame in read] == frames


def _write_first_format(directory: Path, object_id: bytes, generation: int, payload: bytes) -> None:
    """A file as servers wrote them before the frames were recorded (b"SCALOBJ1")."""
    header = struct.pack("<8sQHHH", MAGIC_V1, len(payload), len(object_id), len(OWNER), 1)
    trailer = struct.pack("<I8s", zlib.crc32(payload), END_MAGIC)
    path = object_path(str(directory), object_id, generation)
    Path(path).write_bytes(header + object_id + OWNER + b"n" + payload + trailer)


def test_a_file_of_the_first_format_is_still_found_and_read_in_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("scaler.object_storage.spill_files.CHUNK_BYTES", MAP_FROM_BYTES)
    payload = os.urandom(2 * MAP_FROM_BYTES + 1)
    _write_first_format(tmp_path, b"old", 4, payload)
    assert scan_spill_directory(str(tmp_path)).found == [FoundObject(b"old", OWNER, "n", len(payload), 4)]
    frames = read_object_file(str(tmp_path), b"old", 4, len(payload))
    assert [len(frame) for frame in frames] == [MAP_FROM_BYTES, MAP_FROM_BYTES, 1]
    assert b"".join(frames) == payload
    assert CHUNK_BYTES > MAP_FROM_BYTES


def test_a_frame_table_that_does_not_add_up_is_discarded_at_start(tmp_path: Path) -> None:
    path = _write(tmp_path, b"table", 1, [b"abc", b"defg"])
    with open(path, "r+b") as file:
        head = file.read(HEADER_BYTES + len(b"table") + len(OWNER) + 1)
        file.write(struct.pack("<QQ", 3, 5))  # 8 bytes in all where the header says 7
    assert head.startswith(MAGIC)
    scan = scan_spill_directory(str(tmp_path))
    assert scan.found == []
    assert "frames add up to 8 bytes" in scan.discarded[0][1]


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


# ---------------------------------------------------------------- properties (hypothesis)

#: Bounded examples, no deadline (a loaded machine), no example database written into the repository.
PROPERTY = settings(max_examples=150, deadline=None, database=None)

object_ids = st.binary(min_size=1, max_size=80)  # over 64 bytes: a hashed file name
frame_lists = st.lists(st.binary(max_size=300), max_size=5)  # empty frames and zero-frame objects included


@PROPERTY
@given(
    object_id=object_ids,
    owner=st.binary(max_size=20),
    name=st.text(max_size=20),
    frames=frame_lists,
    generation=st.integers(1, 2**40),
    mapped=st.booleans(),
)
def test_property_every_file_reads_back_the_frames_it_was_written_with(
    object_id: bytes, owner: bytes, name: str, frames: list[bytes], generation: int, mapped: bool
) -> None:
    """Any object, owner, name and frames: the scan finds what was written, the read gives its frames back (from a
    memory map or from bytes). Fails on the first format, which gave the frames back joined (issue 38)."""
    total = sum(len(frame) for frame in frames)
    with (
        tempfile.TemporaryDirectory() as directory,
        mock.patch("scaler.object_storage.spill_files.MAP_FROM_BYTES", 0 if mapped and total else MAP_FROM_BYTES),
    ):
        write_object_file(directory, object_id, generation, owner, name, [memoryview(frame) for frame in frames])
        scan = scan_spill_directory(directory)
        assert scan.found == [FoundObject(object_id, owner, name, total, generation)] and scan.discarded == []
        read = read_object_file(directory, object_id, generation, total)
        assert [bytes(frame) for frame in read] == frames


@PROPERTY
@given(frames=frame_lists.filter(lambda frames: sum(map(len, frames)) > 0), data=st.data())
def test_property_a_file_with_any_byte_changed_or_cut_short_is_never_served(
    frames: list[bytes], data: st.DataObject
) -> None:
    """Change any one byte of a spill file, or cut it anywhere: the scan discards it, or its read raises
    SpillFileError; it never gives other frames (nor the same bytes framed otherwise), nor another owner. Fails on
    the first format, whose CRC covered the payload only: a changed byte of the owner was served (the object then
    belonged to someone else)."""
    with tempfile.TemporaryDirectory() as directory:
        write_object_file(directory, b"obj", 7, OWNER, "n", [memoryview(frame) for frame in frames])
        path = object_path(directory, b"obj", 7)
        content = bytearray(Path(path).read_bytes())
        if data.draw(st.booleans(), label="cut short"):
            content = content[: data.draw(st.integers(0, len(content) - 1), label="length")]
        else:
            offset = data.draw(st.integers(0, len(content) - 1), label="offset")
            content[offset] ^= data.draw(st.integers(1, 255), label="flip")
        Path(path).write_bytes(bytes(content))
        found = scan_spill_directory(directory).found
        if not found:
            return
        with pytest.raises(SpillFileError):
            read_object_file(directory, b"obj", 7, found[0].total_bytes)
