"""The monitor feed's cost to the scheduler: its CPU time for a W1-like run (10,000 tiny tasks submitted one by
one, then gathered) with the feed published every `--interval` seconds (the scheduler's default, 1 s) to a
subscriber that reads everything, against the same run with the feed published once an hour (no snapshot,
no transition, no subscriber).

    python benchmarks/feed_cost.py [--tasks 10000] [--repeat 5] [--interval 1]

Prints the scheduler's CPU seconds per run (user + system, from psutil) and the median overhead.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from scaler import Client
from scaler.io.address import free_tcp_port_block
from scaler.monitor.feed import FeedReader

BIN = Path(sys.executable).parent


def inc(value: int) -> int:
    return value + 1


def one_run(tasks: int, status_interval: float, subscribe: bool) -> float:
    base = free_tcp_port_block(3)
    scheduler, storage, monitor = (f"tcp://127.0.0.1:{base + offset}" for offset in range(3))
    quiet = ["-ll", "WARNING"]
    started = [
        subprocess.Popen([BIN / "scaler_object_storage_server", storage, *quiet]),
        subprocess.Popen(
            [BIN / "scaler_scheduler", scheduler, "-osa", storage, "-p", "False", "-sri", str(status_interval), *quiet]
        ),
        subprocess.Popen([BIN / "scaler_cluster", "-n", "2", scheduler, *quiet]),
    ]
    stop = threading.Event()
    reader_thread = None
    try:
        process = psutil.Process(started[1].pid)
        with Client(address=scheduler) as client:
            while client._agent.worker_count < 2:
                time.sleep(0.05)
            if subscribe:
                reader_thread = threading.Thread(target=_read_everything, args=(monitor, stop), daemon=True)
                reader_thread.start()
                time.sleep(0.5)
            before = process.cpu_times()
            futures = [client.submit(inc, n) for n in range(tasks)]
            assert [future.result() for future in futures] == [n + 1 for n in range(tasks)]
            after = process.cpu_times()
        return (after.user - before.user) + (after.system - before.system)
    finally:
        stop.set()
        if reader_thread is not None:
            reader_thread.join()
        for child in reversed(started):
            child.terminate()
        for child in started:
            child.wait(20)


def _read_everything(address: str, stop: threading.Event) -> None:
    with FeedReader(address) as reader:
        while not stop.is_set():
            reader.receive(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0, help="the feed's publication period in seconds")
    args = parser.parse_args()
    with_feed, without_feed = [], []
    for round_number in range(args.repeat):
        without_feed.append(one_run(args.tasks, 3600.0, subscribe=False))
        with_feed.append(one_run(args.tasks, args.interval, subscribe=True))
        print(f"round {round_number + 1}: scheduler CPU {without_feed[-1]:.3f} s without the feed, "
              f"{with_feed[-1]:.3f} s with it (every {args.interval:g} s, read by a subscriber)")  # fmt: skip
    off, on = statistics.median(without_feed), statistics.median(with_feed)
    paired = statistics.median(100 * (b - a) / a for a, b in zip(without_feed, with_feed, strict=True))
    print(f"median: {off:.3f} s -> {on:.3f} s ({100 * (on - off) / off:+.1f}%); median of the paired rounds: "
          f"the feed costs {paired:+.1f}% of the scheduler's CPU")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
