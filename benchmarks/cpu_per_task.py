"""W1's cost per task, process by process: CPU (user and system) and context switches.

    python benchmarks/cpu_per_task.py [--tasks 30000]
    PYTHONPATH=/path/to/another/checkout python benchmarks/cpu_per_task.py   # the same for another version

A local cluster of 2 workers runs `inc` `--tasks` times, 10,000 submitted at a time and gathered, after a
warm-up; psutil reads every process of the cluster before and after. On two cores a workload like W1 is bound
by the sum of these figures, so they say where a tiny task's time goes: which process, and how much of it is
the kernel and waking up (a voluntary switch is a process that went to sleep waiting for a message). Not a test.
"""

from __future__ import annotations

import argparse
import time

import psutil

from scaler import Client, SchedulerClusterCombo

BATCH = 10_000


def inc(x: int) -> int:
    return x + 1


def sample(processes: list[psutil.Process]) -> dict[int, tuple[str, float, float, int, int]]:
    found = {}
    for process in processes:
        try:
            times, switches = process.cpu_times(), process.num_ctx_switches()
            found[process.pid] = (process.name(), times.user, times.system, switches.voluntary, switches.involuntary)
        except psutil.Error:
            pass
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=30_000, help="rounded up to a multiple of 10,000")
    tasks = -(-parser.parse_args().tasks // BATCH) * BATCH
    cluster = SchedulerClusterCombo(n_workers=2, logging_level="WARNING")
    with cluster, Client(cluster.get_address()) as client:
        for _ in range(3):
            [future.result() for future in [client.submit(inc, i) for i in range(2_000)]]
        me = psutil.Process()
        processes = [me, *me.children(recursive=True)]
        before = sample(processes)
        started = time.perf_counter()
        for _ in range(tasks // BATCH):
            [future.result() for future in [client.submit(inc, i) for i in range(BATCH)]]
        seconds = time.perf_counter() - started
        after = sample(processes)
    by_name: dict[str, list[float]] = {}
    for pid, (name, user, system, voluntary, involuntary) in after.items():
        if pid in before:
            _, user0, system0, voluntary0, involuntary0 = before[pid]
            row = by_name.setdefault("client" if pid == me.pid else name, [0.0, 0.0, 0.0, 0.0])
            for index, value in enumerate((user - user0, system - system0, voluntary - voluntary0,
                                           involuntary - involuntary0)):  # fmt: skip
                row[index] += value
    print(f"{tasks:,} tasks in {seconds:.2f} s: {tasks / seconds:,.0f} tasks/s")
    print(f"{'process':16s} {'user us':>8s} {'sys us':>8s} {'voluntary':>10s} {'involuntary':>12s}  (per task)")
    total = 0.0
    for name, (user, system, voluntary, involuntary) in sorted(by_name.items()):
        if user + system + voluntary + involuntary == 0:
            continue
        total += user + system
        print(f"{name:16s} {user / tasks * 1e6:8.1f} {system / tasks * 1e6:8.1f} {voluntary / tasks:10.2f} "
              f"{involuntary / tasks:12.2f}")  # fmt: skip
    print(f"{'total':16s} {total / tasks * 1e6:17.1f}")


if __name__ == "__main__":
    main()
