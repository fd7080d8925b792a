"""Where the object storage keeps the objects it holds in memory: its segment directory, chosen, locked and adopted.

The directory is `scaler-objects-<uid>-<key>` under a parent: `--shared-memory-directory` (default /dev/shm, a
tmpfs: its files are memory that every process of the host may map). The key is a digest of the server's address,
so a server started again at the same address finds the directory its predecessor left, and adopts what is in it.

**The fallback.** A parent with less free space than half the memory budget (Docker's 64 MB /dev/shm, an ECS or
Fargate unit's) cannot hold what the budget lets the store keep: the directory then goes to the temporary directory
(TMPDIR, else /tmp) instead, where a file mapping is backed by the page cache: still shared by the processes of the
host, still without a copy per reader, but written back to the disk by the kernel in the background. The choice is
logged either way (a warning for the fallback, naming both sizes and the settings that change it); it is never
silent. A segment that does not fit any more at run time (the tmpfs filled) is kept in the server's memory instead.

**Lifetime.** The server holds an exclusive `flock` on `.lock` while it runs (the pid inside), touches it every
statistics interval, and removes the directory when it stops. A server that was killed cannot: its reaper
(segment_reaper.py, a process of its own session that waits for the server's end) removes the directory unless a
successor at the same address takes it over within 5 seconds (a scheduler restarting its storage: the objects
survive the crash). Without a reaper (it could not start, or SCALER_SEGMENT_REAPER=0),
or when the reaper was killed with the server, the next server at the same address adopts its files (`.boot` names
the boot they were written in: files of another boot are discarded, since a disk-backed fallback may hold files torn
by a crash of the machine), and any server that starts removes the directories of its user in its parent whose lock
nobody holds and that were not touched for `STALE_SECONDS` (a server that died for good: its objects in memory are
gone, as they always were; with a spill directory they are still there).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from scaler.config.byte_size import format_byte_size
from scaler.object_storage.segment_files import PUT_SUFFIX
from scaler.object_storage.segment_sight import boot_id
from scaler.object_storage.spill_files import SpillDirectoryError, lock_spill_directory
from scaler.protocol.storage_messages import SegmentDirectory

logger = logging.getLogger(__name__)

DEFAULT_PARENT = "/dev/shm"
PREFIX = "scaler-objects-"
#: The parent must have at least this share of the memory budget free, or the fallback is taken.
ENOUGH_SHARE = 0.5
#: A directory whose lock nobody holds and that was not touched for this long belongs to a server that died.
STALE_SECONDS = 300.0
#: A file written for adoption and not adopted for this long was abandoned (its writer died before asking).
PUT_FILE_SECONDS = 600.0
BOOT_FILE = ".boot"
LOCK_FILE = ".lock"
_TMPFS_MAGIC = {"tmpfs", "ramfs"}


@dataclass(frozen=True)
class SegmentPlace:
    """The parent chosen, whether it is shared memory, and what to log (`warning`: the fallback was taken)."""

    parent: str
    shared_memory: bool
    text: str
    warning: bool


def free_bytes(path: str) -> int | None:
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def is_memory_filesystem(path: str) -> bool:
    """Whether `path` is on a tmpfs or ramfs (its files are memory, not page cache over a disk)."""
    try:
        with open("/proc/self/mountinfo") as file:
            mounts = [line.split() for line in file]
    except OSError:
        return False
    real = os.path.realpath(path)
    best, kind = "", ""
    for fields in mounts:
        if "-" not in fields:
            continue
        point, filesystem = fields[4], fields[fields.index("-") + 1]
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, filesystem
    return kind in _TMPFS_MAGIC


def choose_parent(
    preferred: str | None,
    budget: int,
    free: Callable[[str], int | None] = free_bytes,
    memory_filesystem: Callable[[str], bool] = is_memory_filesystem,
    fallback: str | None = None,
) -> SegmentPlace:
    """The parent of the segment directory: `preferred` (default /dev/shm) when it has at least ENOUGH_SHARE of the
    budget free, else the temporary directory. Pure apart from the two probes it is given."""
    parent = os.path.abspath(preferred or DEFAULT_PARENT)
    setting = "--shared-memory-directory" if preferred else "the default, /dev/shm"
    available = free(parent)
    if available is not None and available >= budget * ENOUGH_SHARE:
        shared = memory_filesystem(parent)
        kind = "shared memory" if shared else "a file mapping backed by the page cache"
        return SegmentPlace(
            parent, shared,
            f"objects in memory are files in {parent} ({kind}, {format_byte_size(available)} free; {setting}), "
            f"mapped by the processes of this host",
            warning=False,
        )  # fmt: skip
    other = os.path.abspath(fallback or tempfile.gettempdir())
    why = "does not exist" if available is None else f"has {format_byte_size(available)} free"
    return SegmentPlace(
        other, memory_filesystem(other),
        f"{parent} ({setting}) {why}, less than half the memory budget of {format_byte_size(budget)}: objects in "
        f"memory are files in {other} instead, a file mapping backed by the page cache (still shared by the "
        f"processes of this host without a copy each, but written back to its disk in the background). Give the "
        f"host or container more shared memory (docker run --shm-size, an ECS task's sharedMemorySize), lower "
        f"--max-memory, or set --shared-memory-directory",
        warning=True,
    )  # fmt: skip


def directory_name(address: str) -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return f"{PREFIX}{uid}-{hashlib.sha256(address.encode()).hexdigest()[:16]}"


def open_segment_directory(parent: str, address: str) -> tuple[str, int, str]:
    """Create (or find) and lock the server's directory under `parent`; returns its path, the lock's descriptor and
    what happened to files of another boot ("" when none). Raises SpillDirectoryError when another server holds it."""
    directory = os.path.join(parent, directory_name(address))
    lock = lock_spill_directory(directory, what="segment directory")
    now = boot_id()
    boot_path = os.path.join(directory, BOOT_FILE)
    try:
        with open(boot_path) as file:
            written = file.read().strip()
    except OSError:
        written = now
    note = ""
    if written != now:
        removed = _empty(directory)
        note = f"discarded {removed} file(s) written before the machine restarted"
    with open(boot_path, "w") as file:
        file.write(now + "\n")
    return directory, lock, note


def _empty(directory: str) -> int:
    removed = 0
    for entry in os.scandir(directory):
        if entry.name not in (LOCK_FILE, BOOT_FILE) and entry.is_file(follow_symlinks=False):
            os.unlink(entry.path)
            removed += 1
    return removed


def describe(directory: str, shared_memory: bool) -> SegmentDirectory:
    """What a hello's reply says of the directory, so that a peer can tell whether it sees the same one."""
    stats = os.stat(directory)
    return SegmentDirectory(directory, boot_id(), stats.st_dev, stats.st_ino, shared_memory)


def touch(lock_descriptor: int) -> None:
    """Mark the directory as alive (see STALE_SECONDS)."""
    try:
        os.utime(lock_descriptor)
    except OSError:
        pass


def sweep_stale(parent: str, own: str, now: float | None = None) -> list[str]:
    """Remove the directories of this user under `parent` left by servers that died (lock free, not touched for
    STALE_SECONDS); returns their paths."""
    now = time.time() if now is None else now
    uid = os.getuid() if hasattr(os, "getuid") else 0
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(f"{PREFIX}{uid}-") or entry.path == own:
            continue
        lock_path = os.path.join(entry.path, LOCK_FILE)
        try:
            descriptor = os.open(lock_path, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live server holds it
            if now - os.fstat(descriptor).st_mtime < STALE_SECONDS:
                continue  # died recently: its successor may still come and adopt it
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        finally:
            os.close(descriptor)
    return removed


def sweep_put_files(directory: str, now: float | None = None) -> list[str]:
    """Remove the files peers wrote for adoption that were not adopted within PUT_FILE_SECONDS (their writer died, or
    its request never came); returns their paths."""
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        try:
            if entry.name.endswith(PUT_SUFFIX) and now - entry.stat(follow_symlinks=False).st_mtime > PUT_FILE_SECONDS:
                os.unlink(entry.path)
                removed.append(entry.path)
        except OSError:
            continue
    return removed


def remove_directory(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


__all__ = [
    "SegmentPlace",
    "SpillDirectoryError",
    "boot_id",  # re-exported from segment_sight
    "choose_parent",
    "describe",
    "directory_name",
    "open_segment_directory",
    "remove_directory",
    "sweep_stale",
    "touch",
]
