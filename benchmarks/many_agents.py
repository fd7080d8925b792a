"""Dispatch keeps many worker agents busy: 64 agents (one processor each) on this machine, tasks that sleep.

    python benchmarks/many_agents.py [--workers 64] [--rounds 10] [--task-seconds 1]

Maps WORKERS x ROUNDS tasks of TASK_SECONDS each (sleeping, so the machine's 2 cores are not the limit) and
prints the time against the ideal ROUNDS x TASK_SECONDS, and the most workers seen busy at once in the monitor
feed. Not a test.
"""

from __future__ import annotations

import argparse
import threading
import time

from scaler import Client, SchedulerClusterCombo
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC


def nap(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--task-seconds", type=float, default=1.0)
    arguments = parser.parse_args()
    busiest, connected = [0], [0]
    watching = threading.Event()
    watching.set()
    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster:

        def watch(address: str) -> None:
            reader = FeedReader(address, topics=(STATUS_TOPIC,))
            while watching.is_set():
                message = reader.receive(0.2)
                if isinstance(message, m.StatusSnapshot):
                    connected[0] = len(message.workers)
                    busy = sum(1 for worker in message.workers if worker.assigned > 0)
                    busiest[0] = max(busiest[0], busy)
            reader.close()

        watcher = threading.Thread(target=watch, args=(cluster.monitor_address,), daemon=True)
        watcher.start()
        started = time.monotonic()
        while connected[0] < arguments.workers and time.monotonic() - started < 300:
            time.sleep(0.5)
        with Client(address=cluster.get_address(), timeout_seconds=300) as client:
            began = time.monotonic()
            client.map(nap, [arguments.task_seconds] * (arguments.workers * arguments.rounds))
            elapsed = time.monotonic() - began
            watching.clear()
            watcher.join(5)
    ideal = arguments.rounds * arguments.task_seconds
    print(f"{arguments.workers} agents x {arguments.rounds} rounds of {arguments.task_seconds:g} s tasks")
    print(f"  time {elapsed:.2f} s against the ideal {ideal:.2f} s ({elapsed / ideal:.2f}x); "
          f"most agents busy at once: {busiest[0]} of {arguments.workers}")  # fmt: skip


if __name__ == "__main__":
    main()
