"""An idle scheduler's CPU per thread (its main thread, ZeroMQ's I/O thread) and wake-ups, with N fake workers.

    cd benchmarks && ../.venv/bin/python -m scale.threads --workers 1000 --seconds 40
    PYTHONPATH=/tmp/before ../.venv/bin/python -m scale.threads --workers 1000   # another tree's scheduler

The harness's scheduler and fleet (`scale.processes`); once the workers registered and had the cluster's heartbeat
period, each thread's CPU seconds (`/proc/<pid>/task/<tid>/stat`) and context switches (`.../status`) over the
window, in percent of a core and a second. The idle pace's figures (scaler/scheduler/core/pace.py); not a test.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from scale.axes import SETTLE_SECONDS, links_for
from scale.processes import Fleet, Scheduler

TICKS = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[tuple[str, str], tuple[float, int]]:
    """(thread id, name) -> (CPU seconds, context switches) of each thread of the process."""
    found: dict[tuple[str, str], tuple[float, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        folder = Path(f"/proc/{pid}/task/{tid}")
        try:
            fields = (folder / "stat").read_text().rsplit(")", 1)[1].split()
            name = (folder / "comm").read_text().strip()
            status = dict(line.split(":", 1) for line in (folder / "status").read_text().splitlines() if ":" in line)
        except OSError:  # the thread ended meanwhile
            continue
        switches = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
        found[(tid, name)] = ((int(fields[11]) + int(fields[12])) / TICKS, switches)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--logs", type=Path, default=Path("/tmp/scale-logs"))
    arguments = parser.parse_args()
    arguments.logs.mkdir(parents=True, exist_ok=True)
    scheduler = Scheduler(arguments.logs / "threads-scheduler.log")
    fleet = None
    try:
        beats = 0
        if arguments.workers:
            fleet = Fleet(scheduler.address, arguments.logs / "threads-workers.log", workers=arguments.workers,
                          tag="w", links=links_for(arguments.workers))  # fmt: skip
            fleet.ask("connect")
            time.sleep(SETTLE_SECONDS + fleet.ask("report")["longest_period"])
            beats = fleet.ask("report")["heartbeats_sent"]
        else:
            time.sleep(SETTLE_SECONDS)
        pid = scheduler.process.pid
        before, started, cpu = threads(pid), time.monotonic(), scheduler.cpu_seconds()
        time.sleep(arguments.seconds)
        after, wall = threads(pid), time.monotonic() - started
        cpu = scheduler.cpu_seconds() - cpu
        rate = (fleet.ask("report")["heartbeats_sent"] - beats) / wall if fleet is not None else 0.0
        print(f"{arguments.workers:,} workers: {cpu / wall * 100:.2f}% of a core over {wall:.0f} s, {rate:.1f} "
              f"heartbeats a second, load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        for key, (seconds, switches) in sorted(after.items()):
            was_seconds, was_switches = before.get(key, (0.0, 0))
            print(f"  {key[1]:<18} {(seconds - was_seconds) / wall * 100:6.2f}%  "
                  f"{(switches - was_switches) / wall:7.1f} wake-ups a second")  # fmt: skip
    finally:
        if fleet is not None:
            fleet.stop()
        scheduler.stop()


if __name__ == "__main__":
    main()
