"""Where a task's time goes, process by process, for W3 (sequential round trips) and W1 (many tiny tasks at once):
CPU (user + system) and context switches per task, and the wall figures beside them.

    python benchmarks/route_cost.py [--calls 2000] [--tasks 20000]
    PYTHONPATH=/path/to/another/checkout python benchmarks/route_cost.py   # the same for another version

A local cluster of 2 workers; psutil reads every process of it before and after each part. CPU per task is much
less noisy than wall time on a shared, loaded machine (other processes take cores; they do not add CPU to ours), so
this is what compares two versions of the route (each with its defaults). Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import psutil

from scaler import Client, SchedulerClusterCombo


def inc(x: int) -> int:
    return x + 1


Sample = dict[int, tuple[str, float, float, int, int]]


def sample(processes: list[psutil.Process]) -> Sample:
    found = {}
    for process in processes:
        try:
            times, switches = process.cpu_times(), process.num_ctx_switches()
            found[process.pid] = (process.name(), times.user, times.system, switches.voluntary, switches.involuntary)
        except psutil.Error:
            pass
    return found


def by_role(before: Sample, after: Sample, client_pid: int) -> dict[str, list[float]]:
    roles: dict[str, list[float]] = {}
    for pid, (name, user, system, voluntary, involuntary) in after.items():
        if pid not in before:
            continue
        _, user0, system0, voluntary0, involuntary0 = before[pid]
        row = roles.setdefault("client" if pid == client_pid else name, [0.0, 0.0, 0.0, 0.0])
        for index, value in enumerate(
            (user - user0, system - system0, voluntary - voluntary0, involuntary - involuntary0)
        ):
            row[index] += value
    return roles


def measured(client: Client, part: Callable[[], float], count: int) -> tuple[float, dict[str, list[float]]]:
    me = psutil.Process()
    processes = [me, *me.children(recursive=True)]
    before = sample(processes)
    figure = part()
    after = sample(processes)
    roles = by_role(before, after, me.pid)
    return figure, {name: [value / count for value in row] for name, row in roles.items()}


def show(title: str, figure: str, roles: dict[str, list[float]]) -> None:
    print(f"{title}: {figure}")
    print(f"  {'process':18s} {'cpu us':>8s} {'(sys)':>7s} {'voluntary':>10s} {'involuntary':>12s}  per task")
    total = 0.0
    for name, (user, system, voluntary, involuntary) in sorted(roles.items()):
        if user + system + voluntary + involuntary == 0:
            continue
        total += user + system
        print(f"  {name:18s} {(user + system) * 1e6:8.1f} {system * 1e6:7.1f} {voluntary:10.2f} {involuntary:12.2f}")
    print(f"  {'total':18s} {total * 1e6:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="W3's sequential round trips")
    parser.add_argument("--tasks", type=int, default=20_000, help="W1's tasks, submitted at once")
    arguments = parser.parse_args()
    settings: dict[str, Any] = {"n_workers": 2, "logging_level": "WARNING"}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    cluster = SchedulerClusterCombo(**settings)
    with cluster, Client(cluster.get_address()) as client:
        for _ in range(3):
            [future.result() for future in [client.submit(inc, i) for i in range(2_000)]]

        def w3() -> float:
            times = []
            for i in range(arguments.calls):
                started = time.perf_counter()
                client.submit(inc, i).result()
                times.append(time.perf_counter() - started)
            return statistics.median(times) * 1000

        def w1() -> float:
            started = time.perf_counter()
            [future.result() for future in [client.submit(inc, i) for i in range(arguments.tasks)]]
            return arguments.tasks / (time.perf_counter() - started)

        p50, w3_roles = measured(client, w3, arguments.calls)
        rate, w1_roles = measured(client, w1, arguments.tasks)
    show(f"W3, {arguments.calls} sequential round trips", f"p50 {p50:.3f} ms", w3_roles)
    show(f"W1, {arguments.tasks} tasks at once", f"{rate:,.0f} tasks/s", w1_roles)


if __name__ == "__main__":
    main()
