"""What W1 and W3 would cost on the processor's own link: the route actors' calls take (scheduler -> the processor's
link -> scheduler, no worker agent), measured beside plain tasks in one cluster, alternated. An estimate for the
next change of the task route (benchmarks/NOTES.md, "W1 and W3: where a tiny task's time goes"), not a figure of
tasks: an actor's calls skip the scheduler's task table, so tasks on that route would cost the scheduler more.

    python benchmarks/processor_link_route.py [--tasks 20000] [--calls 1000] [--rounds 2]

A local cluster of 2 workers and one actor on each. Per round: W1's shape (`--tasks` submitted at once, then
gathered) as tasks and as actor calls (spread over the two actors), and W3's (`--calls` sequential round trips)
as tasks and as calls; CPU per task of every process of the cluster (psutil), as `route_cost.py` reads it. Not a
test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import psutil
from route_cost import by_role, sample

from scaler import Client, SchedulerClusterCombo


def inc(x: int) -> int:
    return x + 1


class Counter:
    def inc(self, x: int) -> int:
        return x + 1


def cpu_per_task(count: int, part: Callable[[], float]) -> tuple[float, dict[str, float]]:
    me = psutil.Process()
    processes = [me, *me.children(recursive=True)]
    before = sample(processes)
    figure = part()
    roles = by_role(before, sample(processes), me.pid)
    return figure, {name: (row[0] + row[1]) / count * 1e6 for name, row in roles.items() if row[0] + row[1] > 0}


def show(label: str, figure: str, per_process: dict[str, float]) -> None:
    parts = "  ".join(f"{name} {value:.0f}" for name, value in sorted(per_process.items()) if value >= 1)
    print(f"  {label:22s} {figure:>14s}   CPU per task {sum(per_process.values()):5.0f} us  ({parts})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20_000, help="W1's shape: submitted at once")
    parser.add_argument("--calls", type=int, default=1_000, help="W3's shape: sequential round trips")
    parser.add_argument("--rounds", type=int, default=2)
    arguments = parser.parse_args()
    cluster = SchedulerClusterCombo(n_workers=2, logging_level="WARNING")
    with cluster, Client(cluster.get_address()) as client:
        actors: list[Any] = [client.actor(Counter) for _ in range(2)]
        ways: dict[str, Callable[[int], Any]] = {
            "tasks": lambda i: client.submit(inc, i),
            "actor calls": lambda i: actors[i % 2].inc(i),
        }
        for way in ways.values():  # warm-up: functions cached, staging learned, links open
            [future.result() for future in [way(i) for i in range(2_000)]]

        def many(way: Callable[[int], Any]) -> float:
            started = time.perf_counter()
            [future.result() for future in [way(i) for i in range(arguments.tasks)]]
            return arguments.tasks / (time.perf_counter() - started)

        def sequential(way: Callable[[int], Any]) -> float:
            times = []
            for i in range(arguments.calls):
                started = time.perf_counter()
                way(i).result()
                times.append(time.perf_counter() - started)
            return statistics.median(times) * 1000

        for round_number in range(1, arguments.rounds + 1):
            print(f"round {round_number} (load average {psutil.getloadavg()[0]:.1f} on {psutil.cpu_count()} cores)")
            for label, way in ways.items():
                rate, per_process = cpu_per_task(arguments.tasks, lambda way=way: many(way))
                show(f"W1 shape, {label}", f"{rate:,.0f}/s", per_process)
            for label, way in ways.items():
                p50, per_process = cpu_per_task(arguments.calls, lambda way=way: sequential(way))
                show(f"W3 shape, {label}", f"p50 {p50:.3f} ms", per_process)


if __name__ == "__main__":
    main()
