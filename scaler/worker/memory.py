"""The worker's memory as the kernel sees it: the limit it runs under, what its processes are charged, and whether
the kernel's OOM killer struck.

The limit is the worker's memory cgroup's (v1: `memory.limit_in_bytes` under `/sys/fs/cgroup/memory`; v2:
`memory.max` under `/sys/fs/cgroup`), the smallest along the path from the worker's cgroup to the root, since any of
them can make the kernel reclaim and kill; without a cgroup limit (or with one above the machine's memory) it is
the machine's memory. A process is charged its PSS (proportional set size: a page shared by n processes counts 1/n
in each), so the processors forked from one zygote do not each count the zygote's pages, as their RSS would.

OOM kills are counted by the kernel: `oom_kill` in the limiting cgroup's `memory.events` (v2, where a cgroup counts
the kills under it), in `memory.oom_control` (v1) of the cgroup the killed process was in (v1 counts a kill there
only: a worker in a cgroup below the limiting one, as Slurm's `task_0` below its job's and step's, has its kills
counted in its own, so the counters from its own cgroup up to the limiting one are summed), and in `/proc/vmstat`
for the whole machine. A processor that died of SIGKILL while one of these counters moved was killed for memory.

The parsers are pure (text in, numbers out); `find_memory_limit` and `oom_kill_count` read the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: a v1 limit at or above this is "no limit" (the kernel's unlimited value is 2**63 rounded down to a page)
_UNLIMITED_V1 = 1 << 62


@dataclass(frozen=True, slots=True)
class MemoryLimit:
    limit_bytes: int
    source: str  #: "cgroup v1", "cgroup v2" or "machine"
    cgroup_dir: Path | None = None  #: the cgroup whose limit it is; its OOM counter is the one to watch
    #: v1: the cgroups from the worker's own up to `cgroup_dir`, whose OOM counters are summed (v1 counts a kill in
    #: the killed process's cgroup only); empty: `cgroup_dir`'s alone
    counted_dirs: tuple[Path, ...] = ()

    def describe(self) -> str:
        return f"{mebibytes(self.limit_bytes)} ({self.source})"


def mebibytes(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def cgroup_paths(proc_self_cgroup: str) -> tuple[str | None, str | None]:
    """(v1 memory controller path, v2 unified path) of a process, from the text of /proc/<pid>/cgroup."""
    v1 = v2 = None
    for line in proc_self_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "memory" in controllers.split(","):
            v1 = path
        elif hierarchy == "0" and controllers == "":
            v2 = path
    return v1, v2


def parse_limit(text: str) -> int | None:
    """A cgroup limit file's value in bytes; None for no limit ("max" in v2, the huge default in v1)."""
    value = text.strip()
    if value == "max" or not value:
        return None
    number = int(value)
    return None if number >= _UNLIMITED_V1 else number


def parse_oom_kills(text: str) -> int:
    """The `oom_kill` count in memory.oom_control, memory.events or /proc/vmstat (0 when the kernel has none)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


def _ancestors(mount: Path, path: str) -> list[Path]:
    """The cgroup directories from the process's own up to the mount's root, those that exist. In a container
    with its own cgroup namespace the path is "/" and the mount's root is the container's cgroup."""
    parts = [part for part in path.split("/") if part]
    found = []
    for depth in range(len(parts), -1, -1):
        directory = mount.joinpath(*parts[:depth])
        if directory.is_dir():
            found.append(directory)
    return found


def find_memory_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> MemoryLimit:
    """The smallest memory limit over this process's cgroups, or the machine's memory."""
    machine = psutil.virtual_memory().total
    try:
        v1, v2 = cgroup_paths(proc_cgroup.read_text())
    except OSError:
        v1 = v2 = None
    best = MemoryLimit(machine, "machine")
    candidates: list[tuple[Path, str, str]] = []
    if v1 is not None and (root / "memory").is_dir():
        candidates += [(d, "memory.limit_in_bytes", "cgroup v1") for d in _ancestors(root / "memory", v1)]
    if v2 is not None and (root / "cgroup.controllers").exists():
        candidates += [(d, "memory.max", "cgroup v2") for d in _ancestors(root, v2)]
    for index, (directory, name, source) in enumerate(candidates):
        try:
            limit = parse_limit((directory / name).read_text())
        except (OSError, ValueError):
            continue
        if limit is not None and limit < best.limit_bytes:
            below = (
                tuple(d for d, _, kind in candidates[: index + 1] if kind == source) if source == "cgroup v1" else ()
            )
            best = MemoryLimit(limit, source, directory, below)
    return best


def oom_kill_count(limit: MemoryLimit) -> int:
    """The kernel's count of OOM kills in the limiting cgroup, or in the whole machine when there is none."""
    if limit.cgroup_dir is None:
        paths = [Path("/proc/vmstat")]
    elif limit.source == "cgroup v1":
        paths = [directory / "memory.oom_control" for directory in limit.counted_dirs or (limit.cgroup_dir,)]
    else:
        paths = [limit.cgroup_dir / "memory.events"]
    count = 0
    for path in paths:
        try:
            count += parse_oom_kills(path.read_text())
        except (OSError, ValueError):
            continue
    return count


def charged_bytes(process: psutil.Process) -> int:
    """A process's PSS (what the kernel charges it, shared pages divided), or its RSS when PSS is unreadable."""
    try:
        return int(process.memory_full_info().pss)
    except (psutil.AccessDenied, AttributeError):
        return int(process.memory_info().rss)


@dataclass(slots=True)
class _Sample:
    task_id: bytes | None  #: the task it computed when sampled
    bytes: int = 0
    task_peak: int = 0  #: the largest sample while it computed `task_id`


class MemoryWatch:
    """The worker's processors' memory, sampled, and the verdict on a processor's death: was it memory?

    `sample` records each processor's charged memory and, per processor, the peak seen while it computes its current
    task; `verdict` is asked when a processor died of SIGKILL without the agent killing it, and says "out of memory"
    when the kernel counted an OOM kill since the last look, or when the worker's memory was at its limit."""

    #: a worker whose processes were charged this share of the limit at the last sample was at its limit
    AT_LIMIT_SHARE = 0.95

    def __init__(self, limit: MemoryLimit) -> None:
        self.limit = limit
        self._oom_kills = oom_kill_count(limit)
        self._samples: dict[bytes, _Sample] = {}
        self.agent_bytes = 0

    def sample(self, processor_id: bytes, task_id: bytes | None, charged: int) -> None:
        sample = self._samples.get(processor_id)
        if sample is None or sample.task_id != task_id:
            sample = self._samples[processor_id] = _Sample(task_id)
        sample.bytes = charged
        sample.task_peak = max(sample.task_peak, charged)

    def bytes_of(self, processor_id: bytes) -> int:
        sample = self._samples.get(processor_id)
        return sample.bytes if sample is not None else 0

    def total_bytes(self) -> int:
        return self.agent_bytes + sum(sample.bytes for sample in self._samples.values())

    def verdict(self, processor_id: bytes, description: str) -> str:
        """'' when the death was not for memory; else what to tell the task's owner (peak and limit)."""
        sample = self._samples.pop(processor_id, None)
        at_limit = self.total_bytes() + (sample.bytes if sample else 0) >= self.AT_LIMIT_SHARE * self.limit.limit_bytes
        kills = oom_kill_count(self.limit)
        killed_for_memory = kills > self._oom_kills
        self._oom_kills = kills
        if "SIGKILL" not in description or not (killed_for_memory or at_limit):
            return ""
        how = "was killed by the kernel's OOM killer" if killed_for_memory else "died at the worker's memory limit"
        peak = mebibytes(sample.task_peak) if sample is not None and sample.task_peak else "not sampled"
        return (
            f"out of memory: the processor {how}; the task's peak memory seen: {peak}, limit: {self.limit.describe()}"
        )
