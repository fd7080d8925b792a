"""The object storage's default memory budget: half of the memory this process may use.

"May use" is the smaller of the machine's memory (`MemTotal` in /proc/meminfo) and the memory limit of the
process's cgroup (v2: `memory.max`; v1: `memory/memory.limit_in_bytes`; "max" or the v1 "unlimited" value mean
no limit). Half, because the storage rarely has a machine to itself: the scheduler, and often the workers, run
beside it, and a worker holds its own copy of every object it uses while the storage keeps the original. Half
also leaves every workload that fits today's memory room: before the budget existed the storage grew until the
kernel killed it, which happened well before it held all of the memory.

`read_text` is a seam: the functions take a reader of file contents so that the rules are tested without
the files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scaler.config.byte_size import format_byte_size

#: Share of the available memory the storage takes when --max-memory is not given.
DEFAULT_SHARE = 0.5

#: A cgroup v1 limit at or above this means "no limit" (the kernel reports 2**63 - 1 rounded down to a page).
_V1_UNLIMITED = 1 << 62

#: When nothing can be read (not Linux): assume this much memory, so that the storage still has a budget.
FALLBACK_MEMORY_BYTES = 4 * 1024**3

Reader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class MemoryBudget:
    bytes: int
    why: str  #: for the log: "--max-memory" or "half of the cgroup's limit of 8 GiB"


def _read_text(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return None


def machine_memory_bytes(read_text: Reader = _read_text) -> int | None:
    text = read_text("/proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * (1024 if fields[2:3] == ["kB"] else 1)
    return None


def cgroup_memory_limit_bytes(read_text: Reader = _read_text) -> int | None:
    """The memory limit of this process's cgroup (v2 or v1), or None when it has none (or there is no cgroup)."""
    own = read_text("/proc/self/cgroup") or ""
    v2_path: str | None = None
    v1_path: str | None = None
    for line in own.splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        if controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    candidates: list[tuple[str, bool]] = []
    for v2 in (v2_path, "/"):
        if v2 is not None:
            candidates.append((f"/sys/fs/cgroup{v2.rstrip('/')}/memory.max", False))
    for v1 in (v1_path, "/"):
        if v1 is not None:
            candidates.append((f"/sys/fs/cgroup/memory{v1.rstrip('/')}/memory.limit_in_bytes", True))
    for file, is_v1 in candidates:
        text = read_text(file)
        if text is None:
            continue
        value = text.strip()
        if value == "max":
            return None
        if value.isdigit():
            limit = int(value)
            return None if is_v1 and limit >= _V1_UNLIMITED else limit
    return None


def memory_budget(max_memory: int | None, read_text: Reader = _read_text) -> MemoryBudget:
    """The budget: `max_memory` when given, else DEFAULT_SHARE of what this process may use."""
    if max_memory is not None:
        return MemoryBudget(max_memory, "--max-memory")
    machine = machine_memory_bytes(read_text)
    limit = cgroup_memory_limit_bytes(read_text)
    if limit is not None and (machine is None or limit < machine):
        return MemoryBudget(
            int(limit * DEFAULT_SHARE), f"half of the cgroup's memory limit of {format_byte_size(limit)}"
        )
    if machine is not None:
        return MemoryBudget(int(machine * DEFAULT_SHARE), f"half of the machine's {format_byte_size(machine)}")
    assumed = format_byte_size(FALLBACK_MEMORY_BYTES)
    return MemoryBudget(int(FALLBACK_MEMORY_BYTES * DEFAULT_SHARE), f"half of {assumed} (the memory size is unknown)")
