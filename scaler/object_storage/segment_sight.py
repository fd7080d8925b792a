"""Whether a process sees an object storage server's segment directory (so that it may map the server's objects
by name, docs/architecture.md "Objects in shared memory"): what a reader needs, apart from the server's side
(`segment_directory`), so that a client imports nothing POSIX-only beyond `os` (it runs where `fcntl` is absent)."""

from __future__ import annotations

import os

from scaler.protocol.storage_messages import SegmentDirectory


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            return file.read().strip()
    except OSError:
        return ""


def sees(directory: SegmentDirectory) -> bool:
    """Whether this process sees the server's segment directory: the same boot, the same directory (device and
    inode), which it may read and write (the same user)."""
    if not directory.path or directory.boot_id != boot_id() or not directory.boot_id:
        return False
    try:
        stats = os.stat(directory.path)
    except OSError:
        return False
    same = stats.st_dev == directory.device and stats.st_ino == directory.inode
    return same and os.access(directory.path, os.R_OK | os.W_OK | os.X_OK)
