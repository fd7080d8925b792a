"""The soak's memory as a time series: every process of the stack sampled every few seconds, and a verdict per process
and per kind on whether its memory stays flat after the warm-up (issue 38: "memory of every process flat after
warm-up").

Each sample is one CSV row per process: the time since the load started, the process's kind and pid, its RSS, USS
(pages only it holds: what a leak grows), PSS (shared pages divided among their sharers), and the part of its USS in
mapped segment files of the object storage (`scaler-objects-*`: objects in shared memory that only this process
still maps) as against its heap. The storage's objects in shared memory are files of its segment directory (in
/dev/shm), which no process's USS counts unless it maps them: they get rows of their own, kind "object storage
segment files" with pid 0 and the directory's allocated size in every memory column (and the spill directory's as
"object storage spill files", disk rather than memory). Rows are appended and flushed as they are taken, so a run
that fails still leaves its series.

The verdict, per process and per kind (the kind's largest USS at each sample, so that a process replaced by a fault
does not cut the series): after the warm-up (the run's first `warm_up_seconds`; for a process started later, its own
first `warm_up_seconds` too), the least-squares slope of USS in MiB per hour; `flat` when that slope, over the
post-warm-up span, grows by at most the tolerance (`tolerance_mib`, or `share` of the value at the end of
the warm-up, whichever is larger), `GROWING` otherwise; `too short` with fewer than `MIN_SAMPLES` samples after the
warm-up (a process that a fault ended, or that started late).
"""

from __future__ import annotations

import contextlib
import csv
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

MIB = 1 << 20
MIN_SAMPLES = 3
FIELDS = ["seconds", "kind", "pid", "parent", "rss_mib", "uss_mib", "pss_mib", "uss_segments_mib"]
SEGMENT_MARKER = "scaler-objects-"


def _descendants(root: int, marker: str) -> list[psutil.Process]:
    found = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(root).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if marker in " ".join(child.cmdline()):
                    found.append(child)
    return found


def stack_processes(stack: int, storage: int) -> list[tuple[str, psutil.Process, int]]:
    """Every process of the soak's stack as (kind, process, parent pid): the storage server, the scheduler, the worker
    manager, its forker, each worker agent with its zygote and processors, and this process (the clients)."""
    found: list[tuple[str, psutil.Process, int]] = [("soak (clients)", psutil.Process(), 0)]
    with contextlib.suppress(psutil.Error):
        found.append(("object storage", psutil.Process(storage), 0))
    found += [("scheduler", process, stack) for process in _descendants(stack, "scaler.scheduler.process")]
    managers = _descendants(stack, "scaler.worker_manager.process")
    found += [("worker manager", process, stack) for process in managers]
    with contextlib.suppress(psutil.Error):
        for forker in managers[0].children() if managers else []:
            found.append(("worker forker", forker, managers[0].pid))
            for agent in forker.children():
                found.append(("worker agent", agent, forker.pid))
                with contextlib.suppress(psutil.Error):
                    for zygote in agent.children():
                        found.append(("worker zygote", zygote, agent.pid))
                        found += [("worker processor", child, agent.pid) for child in zygote.children()]
    return found


def _allocated(folder: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for entry in folder.rglob("*"):
            with contextlib.suppress(OSError):
                total += entry.stat().st_blocks * 512
    return total


def storage_folders(storage: int, spill: Path) -> list[tuple[str, int]]:
    """(kind, allocated bytes) of the storage's segment directory (found by the lock file it holds open) and of its
    spill directory."""
    segments = None
    with contextlib.suppress(psutil.Error):
        for opened in psutil.Process(storage).open_files():
            if SEGMENT_MARKER in opened.path:
                segments = Path(opened.path).parent
                break
    found = [("object storage spill files", _allocated(spill))]
    if segments is not None:
        found.append(("object storage segment files", _allocated(segments)))
    return found


def _segments_uss(process: psutil.Process) -> int:
    """The part of the process's USS in mapped segment files of the object storage."""
    total = 0
    with contextlib.suppress(psutil.Error):
        for mapped in process.memory_maps(grouped=True):
            if SEGMENT_MARKER in mapped.path:
                total += mapped.private_clean + mapped.private_dirty
    return total


@dataclass(frozen=True)
class Sample:
    seconds: float
    kind: str
    pid: int
    parent: int
    rss: int
    uss: int
    pss: int
    uss_segments: int

    @property
    def key(self) -> tuple[str, int]:
        return self.kind, self.pid

    def row(self) -> list[Any]:
        mib = [round(value / MIB, 2) for value in (self.rss, self.uss, self.pss, self.uss_segments)]
        return [round(self.seconds, 1), self.kind, self.pid, self.parent, *mib]


class MemorySampler:
    """Samples every process of the stack every `interval` seconds on a thread of its own, appending CSV rows to
    `path`; `processes()` says which processes (called at each sample: the stack changes under faults)."""

    def __init__(
        self,
        path: Path,
        interval: float,
        processes: Callable[[], list[tuple[str, psutil.Process, int]]],
        folders: Callable[[], list[tuple[str, int]]] = lambda: [],
    ) -> None:
        self.path = path
        self.samples: list[Sample] = []
        self._interval = interval
        self._processes = processes
        self._folders = folders
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._file: IO[str] = open(path, "w", newline="")
        self._writer = csv.writer(self._file)
        self._writer.writerow(FIELDS)
        self._thread = threading.Thread(target=self._run, name="memory sampler", daemon=True)

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def sample(self) -> None:
        """Take one sample now (also called at the end, after the load stopped)."""
        now = time.monotonic() - self._started
        taken = []
        for kind, process, parent in self._processes():
            with contextlib.suppress(psutil.Error):
                info = process.memory_full_info()
                taken.append(
                    Sample(now, kind, process.pid, parent, info.rss, info.uss, info.pss, _segments_uss(process))
                )
        taken += [Sample(now, kind, 0, 0, size, size, size, 0) for kind, size in self._folders()]
        with self._lock:
            self.samples += taken
            self._writer.writerows(sample.row() for sample in taken)
            self._file.flush()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        self.sample()
        with self._lock:
            self._file.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)


@dataclass(frozen=True)
class Verdict:
    name: str
    samples: int
    at_warm_up: float  #: MiB, the first sample after the warm-up
    at_end: float
    largest: float
    slope: float  #: MiB per hour, after the warm-up
    growth: float  #: MiB, the slope over the post-warm-up span
    tolerance: float
    verdict: str
    segments_at_end: float  #: MiB of the USS at the end in mapped segment files

    def row(self) -> str:
        if self.verdict == "too short":
            return f"| {self.name} | {self.samples} | - | {self.at_end:.1f} | {self.largest:.1f} | - | - | too short |"
        return (
            f"| {self.name} | {self.samples} | {self.at_warm_up:.1f} | {self.at_end:.1f} | {self.largest:.1f} | "
            f"{self.slope:+.1f} | {self.growth:+.1f} (tolerance {self.tolerance:.1f}) | {self.verdict} |"
        )


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB), in MiB per hour."""
    count = len(points)
    mean_t = sum(t for t, _ in points) / count
    mean_v = sum(v for _, v in points) / count
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / spread * 3600


def judge(
    name: str, points: list[tuple[float, float, float]], warm_up_end: float, tolerance_mib: float, share: float
) -> Verdict:
    """The verdict on one series of (seconds, USS MiB, segments MiB) whose warm-up ends at `warm_up_end`."""
    after = [(t, v) for t, v, _ in points if t >= warm_up_end]
    largest = max(v for _, v, _ in points)
    end, segments = points[-1][1], points[-1][2]
    if len(after) < MIN_SAMPLES:
        return Verdict(name, len(points), 0.0, end, largest, 0.0, 0.0, 0.0, "too short", segments)
    slope = _slope(after)
    growth = slope * (after[-1][0] - after[0][0]) / 3600
    tolerance = max(tolerance_mib, share * after[0][1])
    verdict = "flat" if growth <= tolerance else "GROWING"
    return Verdict(name, len(points), after[0][1], end, largest, slope, growth, tolerance, verdict, segments)


def verdicts(
    samples: list[Sample], warm_up_seconds: float, tolerance_mib: float, share: float
) -> tuple[list[Verdict], list[Verdict]]:
    """Per kind (its largest USS at each sample time) and per process (its own warm-up starts at its first sample)."""
    by_kind: dict[str, dict[float, tuple[float, float]]] = {}
    by_process: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    for sample in samples:
        uss, segments = sample.uss / MIB, sample.uss_segments / MIB
        at = by_kind.setdefault(sample.kind, {})
        if sample.seconds not in at or at[sample.seconds][0] < uss:
            at[sample.seconds] = (uss, segments)
        by_process.setdefault(sample.key, []).append((sample.seconds, uss, segments))
    kinds = [
        judge(f"{kind} (largest)", [(t, v, s) for t, (v, s) in sorted(series.items())], warm_up_seconds,
              tolerance_mib, share)
        for kind, series in sorted(by_kind.items())
    ]  # fmt: skip
    processes = [
        judge(f"{kind} {pid}", points, max(warm_up_seconds, points[0][0] + warm_up_seconds), tolerance_mib, share)
        for (kind, pid), points in sorted(by_process.items())
    ]
    return kinds, processes


HEADER = (
    "| series | samples | USS after warm-up (MiB) | at end | largest | slope after warm-up (MiB/h) "
    "| growth after warm-up (MiB) | verdict |\n|---|---:|---:|---:|---:|---:|---:|---|"
)


def report(kinds: list[Verdict], processes: list[Verdict]) -> str:
    lines = [HEADER, *(verdict.row() for verdict in kinds), "", HEADER, *(verdict.row() for verdict in processes)]
    held = [v for v in kinds if v.segments_at_end >= 1]
    if held:
        lines.append("")
        lines += [f"{v.name}: {v.segments_at_end:.1f} MiB of its USS at the end in mapped segment files" for v in held]
    return "\n".join(lines)
