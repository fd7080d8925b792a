"""A real scheduler's memory with a big queue and after it drains (#18): RSS at start, with N tasks queued (no
worker yet), and a few seconds after they all ran.

    .venv/bin/python benchmarks/scheduler_rss.py [--tasks 200000]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from scaler import Client, SchedulerClusterCombo


def noop(x: int) -> int:
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200_000)
    args = parser.parse_args()
    with SchedulerClusterCombo(n_workers=0) as cluster, Client(cluster.get_address()) as client:
        scheduler = psutil.Process(cluster.scheduler_pid)
        time.sleep(1)
        start = scheduler.memory_info().rss
        futures = [client.submit(noop, x) for x in range(args.tasks)]
        time.sleep(3)  # the scheduler has read them all
        queued = scheduler.memory_info().rss
        command = [str(Path(sys.executable).parent / "scaler_cluster"), "-n", "2", cluster.get_address()]
        workers = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for future in futures:
                future.result(timeout=600)
            time.sleep(4)  # two status intervals: the drained table gives its memory back
            drained = scheduler.memory_info().rss
        finally:
            workers.send_signal(signal.SIGTERM)
            workers.wait(60)
    mb = 2**20
    print(f"scheduler RSS: {start / mb:.0f} MB at start, {queued / mb:.0f} MB with {args.tasks:,} tasks queued "
          f"({(queued - start) / args.tasks:.0f} bytes per task), {drained / mb:.0f} MB after they ran")  # fmt: skip


if __name__ == "__main__":
    main()
