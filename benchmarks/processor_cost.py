"""The processor's share of a task's cost beyond the task's own body, for U1's shape (tasks of about 2 ms of numpy,
each reading a window of one shared array sent once): CPU per task of each process of a local cluster, and the
processors' CPU less the CPU their tasks' bodies measured themselves (`time.thread_time()` around the body).

    python benchmarks/processor_cost.py [--tasks 2000] [--megabytes 50] [--rounds 1]
    PYTHONPATH=/path/to/another/checkout python benchmarks/processor_cost.py   # the same for another version

A local cluster of 2 workers (one processor each on two cores); psutil reads every process of it before and after the
measured part (a warm-up of 200 tasks first). The task function is defined here, so it travels by value. Processors'
CPU per task beyond their bodies is the figure to compare (less noisy than wall time on a shared machine); say the load
average with it. docs/performance.md, "The processor's share". Not a test.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import psutil

from scaler import Client, SchedulerClusterCombo

WINDOW = 250_000  #: elements each task reads (as U1's)


def monte_carlo(array: Any, seed: int) -> tuple[float, float]:
    import time

    import numpy

    began = time.thread_time()
    start = (seed * 7_919) % (len(array) - WINDOW)
    window = array[start : start + WINDOW]
    value = float(numpy.sqrt(window * window + 1.0).sum())
    return value, time.thread_time() - began


def cpu(processes: list[psutil.Process]) -> dict[int, tuple[str, float]]:
    found = {}
    for process in processes:
        try:
            times = process.cpu_times()
            found[process.pid] = (process.name(), times.user + times.system)
        except psutil.Error:
            pass
    return found


def main() -> None:
    import numpy

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    array = numpy.random.default_rng(29).random(args.megabytes * 1_000_000 // 8)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.tasks} tasks per round")
    with SchedulerClusterCombo(n_workers=2, logging_level="WARNING") as cluster:
        with Client(cluster.get_address()) as client:
            shared = client.send_object(array)
            [f.result() for f in [client.submit(monte_carlo, shared, seed) for seed in range(200)]]
            me = psutil.Process()
            processes = [me, *me.children(recursive=True)]
            for _ in range(args.rounds):
                before = cpu(processes)
                started = time.perf_counter()
                futures = [client.submit(monte_carlo, shared, seed) for seed in range(args.tasks)]
                bodies = sum(future.result()[1] for future in futures)
                seconds = time.perf_counter() - started
                after = cpu(processes)
                by_name: dict[str, float] = {}
                for pid, (name, used) in after.items():
                    if pid in before:
                        key = "client" if pid == me.pid else name
                        by_name[key] = by_name.get(key, 0.0) + used - before[pid][1]
                per_task = {name: used / args.tasks * 1e6 for name, used in by_name.items() if used > 0}
                shown = ", ".join(f"{name} {value:.0f}" for name, value in sorted(per_task.items()))
                beyond = (by_name.get("scaler-processo", 0.0) - bodies) / args.tasks * 1e6
                print(f"{seconds:.2f} s; CPU us per task: {shown}; task bodies {bodies / args.tasks * 1e6:.0f}; "
                      f"processors beyond their bodies {beyond:.0f} us per task")  # fmt: skip


if __name__ == "__main__":
    main()
