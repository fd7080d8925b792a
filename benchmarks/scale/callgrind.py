"""Instructions per task of the scale harness's scheduler, counted by callgrind: a figure that the machine's load does
not move, for an A/B of two trees at the Scale page's shape (fake workers, one processor link each, a deep queue).

    SCALE_SCHEDULER_CALLGRIND=/tmp/cg ../.venv/bin/python -m scale --axes workers --workers 100 --tasks 2000
    ../.venv/bin/python -m scale.callgrind /tmp/cg

With `SCALE_SCHEDULER_CALLGRIND=DIR` the scheduler runs under `valgrind --tool=callgrind`, its instrumentation off but
in each task window: first `IDLE_SECONDS` with no task (dump 1: the heartbeats' instructions a second), then the
window's tasks (dump 2). Under callgrind the window lasts about fifty times its real length while the fake workers'
heartbeats keep their pace, so the figure is net of them: the window's instructions less the idle rate times its
length, per task (`net_cpu_per_task_us`'s counterpart). `DIR/times.PID` holds the idle and window seconds and the
task count. Needs `valgrind` (apt-get install valgrind)."""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "SCALE_SCHEDULER_CALLGRIND"
IDLE_SECONDS = 10.0


def folder() -> Path | None:
    """Where the counts go, when this run counts them."""
    named = os.environ.get(ENV)
    return Path(named) if named else None


def wrap(command: list[str]) -> list[str]:
    """The scheduler's command, under callgrind when asked (`--trace-children`: it re-executes itself on glibc's
    allocator, and callgrind must follow the exec; not its object storage server, a child of its own that is not
    counted, and that under callgrind took more than the scheduler's 15 s wait to answer on a busy machine)."""
    out = folder()
    if out is None:
        return command
    out.mkdir(parents=True, exist_ok=True)
    return [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=yes",
        "--trace-children-skip-by-arg=scaler.object_storage.server", f"--callgrind-out-file={out}/cg.%p", *command,
    ]  # fmt: skip


def _control(pid: int, *arguments: str) -> None:
    subprocess.run(["callgrind_control", *arguments, str(pid)], check=True, capture_output=True)


@contextmanager
def counted_window(pid: int, tasks: int) -> Iterator[None]:
    """Count the scheduler's instructions while idle, then while the window's tasks run (nothing when not asked)."""
    out = folder()
    if out is None:
        yield
        return
    _control(pid, "--instr=on")
    started = time.monotonic()
    time.sleep(IDLE_SECONDS)
    _control(pid, "--dump")
    idle_seconds, window_started = time.monotonic() - started, time.monotonic()
    yield
    _control(pid, "--instr=off")
    _control(pid, "--dump")
    (out / f"times.{pid}").write_text(f"{idle_seconds} {time.monotonic() - window_started} {tasks}\n")


def _total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"{path}: no totals line (the scheduler ended before its dump?)")


def instructions_per_task(out: Path) -> list[tuple[int, float, float]]:
    """(pid, instructions per task as counted, net of the idle rate) for each scheduler counted in `out`."""
    rows = []
    for times in sorted(out.glob("times.*")):
        pid = int(times.suffix[1:])
        idle_seconds, window_seconds, tasks = times.read_text().split()
        idle, window = _total(out / f"cg.{pid}.1"), _total(out / f"cg.{pid}.2")
        net = window - idle / float(idle_seconds) * float(window_seconds)
        rows.append((pid, window / int(tasks), net / int(tasks)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="SCALE_SCHEDULER_CALLGRIND folders")
    for out in parser.parse_args().folders:
        for pid, raw, net in instructions_per_task(out):
            print(f"{out}  scheduler {pid}: {raw:,.0f} instructions per task, {net:,.0f} net of the idle rate")


if __name__ == "__main__":
    main()
