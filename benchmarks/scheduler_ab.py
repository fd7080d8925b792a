"""The scheduler's hot path, this tree against another commit: instructions per task, which a loaded machine does not
change, and CPU per task beside them. The A/B to run for every change to the scheduler's hot path.

    python benchmarks/scheduler_ab.py                         # the working tree against main
    python benchmarks/scheduler_ab.py --before 006df20        # against a named commit
    python benchmarks/scheduler_ab.py --before v1 --after v2  # two commits
    python benchmarks/scheduler_ab.py --cpu-only              # without valgrind: CPU per task only

Each tree (`git archive REV scaler`, or this checkout's working tree) runs `scheduler_cost.py`'s driver, the real
shell's inbound handler around the real core, in a process of its own with that tree first on PYTHONPATH, on the
allocator its scheduler process runs on (glibc's malloc with fixed thresholds where the tree has
`scheduler/allocator.py`, CPython's otherwise) and with its collector's thresholds. Two shapes: `w1` (a client's tasks
64 to a message, results in bursts, as W1 brings them) and `w3` (one task at a time: a submission, a result, an answer,
as W3's round trips), and `scale` (the scale harness's shape at 100 workers, `scheduler_cost.Shape.together`; run
when `--shapes` names it). For each, the trees run in turn, `--rounds` times: under `valgrind --tool=callgrind`,
counting only the timed parts of the last of two rounds of the driver (its `--collect`: the warm-up round and the
driver's own encoding are not counted), and without it, for the CPU per task (the best of three rounds of
`--cpu-tasks`).
Instructions are the figure to compare: the same tree gives the same count to a few parts in a million, busy machine or
not; the CPU figures move with the machine's load. What it leaves out: ZeroMQ, the event loop and the outbox's timers
(`scale/`, `route_cost.py` measure real processes).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DRIVER = BENCH_DIR / "scheduler_cost.py"
#: the driver's arguments for each shape
SHAPES = {
    "w1": [],
    "w3": ["--batch", "1", "--spaced"],
    # the scale harness's shape at 100 workers (scale/fleet.py: a slot and a link staging one task each, a client's
    # tasks 100 to a part, all submitted at once), without its sockets and heartbeats
    "scale": "--workers 100 --capacity 2 --staged 1 --batch 100 --queued 2000 --together".split(),
}
CALLGRIND = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=ffi_call"]


def unpack(rev: str, into: Path) -> Path:
    """The commit's `scaler/` in `into` (the tree to put first on PYTHONPATH)."""
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", rev, "scaler"], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {rev} failed: {archive.stderr.decode(errors='replace').strip()}")
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def environment(tree: Path) -> dict[str, str]:
    """PYTHONPATH first the tree; the allocator its scheduler process runs on."""
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONMALLOC", "PYTHONPATH"}}
    env["PYTHONPATH"] = str(tree)
    if (tree / "scaler" / "scheduler" / "allocator.py").exists():
        env["PYTHONMALLOC"] = "malloc"
    return env


def instructions(tree: Path, shape: str, tasks: int, out: Path) -> float:
    """Instructions per task of the driver's timed parts, counted by callgrind."""
    command = [*CALLGRIND, f"--callgrind-out-file={out}", sys.executable, str(DRIVER), "--tasks", str(tasks)]
    command += ["--rounds", "2", "--collect", *SHAPES[shape]]
    run = subprocess.run(command, env=environment(tree), cwd=BENCH_DIR, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"callgrind on {tree} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    return int(found.group(1)) / tasks


def cpu(tree: Path, shape: str, tasks: int) -> float:
    """The driver's best CPU per task over three rounds (µs)."""
    command = [sys.executable, str(DRIVER), "--tasks", str(tasks), "--rounds", "3", *SHAPES[shape]]
    run = subprocess.run(command, env=environment(tree), cwd=BENCH_DIR, capture_output=True, text=True, check=False)
    found = re.search(r"best ([\d.]+) us", run.stdout)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"the driver on {tree} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    return float(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="main", help="the commit to compare against (default: %(default)s)")
    parser.add_argument("--after", default="", help="a commit instead of this checkout's working tree")
    parser.add_argument("--shapes", default="w1,w3", help=f"from: {','.join(SHAPES)}")
    parser.add_argument("--tasks", type=int, default=2000, help="tasks counted under callgrind, per tree and shape")
    parser.add_argument("--cpu-tasks", type=int, default=10_000, help="tasks a CPU round runs")
    parser.add_argument("--rounds", type=int, default=1, help="each tree's turns, alternated")
    parser.add_argument("--cpu-only", action="store_true", help="no callgrind (valgrind is not needed)")
    arguments = parser.parse_args()
    shapes = [shape.strip() for shape in arguments.shapes.split(",") if shape.strip()]
    for shape in shapes:
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    if not arguments.cpu_only and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (apt-get install valgrind), or run with --cpu-only")
    with tempfile.TemporaryDirectory(prefix="scheduler-ab-") as scratch:
        work = Path(scratch)
        before = unpack(arguments.before, work / "before")
        after = unpack(arguments.after, work / "after") if arguments.after else REPO_ROOT
        trees = {f"before ({arguments.before})": before, f"after ({arguments.after or 'working tree'})": after}
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        for shape in shapes:
            counted: dict[str, list[float]] = {name: [] for name in trees}
            timed: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(arguments.rounds):
                for name, tree in trees.items():
                    if not arguments.cpu_only:
                        counted[name].append(instructions(tree, shape, arguments.tasks, work / "callgrind.out"))
                    timed[name].append(cpu(tree, shape, arguments.cpu_tasks))
            report(shape, counted, timed)
    return 0


def report(shape: str, counted: dict[str, list[float]], timed: dict[str, list[float]]) -> None:
    (before, after) = list(timed)
    print(f"{shape}: {'':28s} {'instructions/task':>18s} {'CPU us/task (best, each round)':>32s}")
    for name in (before, after):
        count = f"{statistics.median(counted[name]):,.0f}" if counted[name] else "-"
        cpu_text = ", ".join(f"{value:.1f}" for value in timed[name])
        print(f"    {name:30s} {count:>18s} {cpu_text:>32s}")
    if counted[before] and counted[after]:
        ratio = statistics.median(counted[after]) / statistics.median(counted[before])
        print(f"    after / before: {ratio:.3f} in instructions, {min(timed[after]) / min(timed[before]):.3f} in CPU")
    else:
        print(f"    after / before: {min(timed[after]) / min(timed[before]):.3f} in CPU")


if __name__ == "__main__":
    raise SystemExit(main())
