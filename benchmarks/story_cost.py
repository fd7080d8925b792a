"""What each task's story costs W1 (many tiny tasks) and W3 (sequential round trips): two local clusters, one with
stories on (the default) and one with `story_retention_tasks=0` (off: the scheduler records nothing; processors
still stamp their start and end on each result), runs alternated, median of `--repeat` runs each, reported as
ratios to "off".

    python benchmarks/story_cost.py [--tasks 2000] [--calls 200] [--repeat 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from scaler import Client, SchedulerClusterCombo


def inc(value: int) -> int:
    return value + 1


def w1(client: Client, tasks: int) -> float:
    began = time.perf_counter()
    futures = [client.submit(inc, i) for i in range(tasks)]
    assert [future.result() for future in futures][-1] == tasks
    return time.perf_counter() - began


def w3(client: Client, calls: int) -> float:
    began = time.perf_counter()
    for i in range(calls):
        assert client.submit(inc, i).result() == i + 1
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    arguments = parser.parse_args()
    with (
        SchedulerClusterCombo(n_workers=arguments.workers, logging_level="WARNING") as on_cluster,
        SchedulerClusterCombo(n_workers=arguments.workers, logging_level="WARNING", story_retention_tasks=0) as off,
    ):
        clients = {"on": Client(on_cluster.get_address()), "off": Client(off.get_address())}
        times: dict[str, dict[str, list[float]]] = {name: {"W1": [], "W3": []} for name in clients}
        for client in clients.values():  # warm-up
            w1(client, 200)
        for round_number in range(arguments.repeat):
            order = list(clients) if round_number % 2 == 0 else list(reversed(clients))
            for name in order:
                times[name]["W1"].append(w1(clients[name], arguments.tasks))
                times[name]["W3"].append(w3(clients[name], arguments.calls))
        for client in clients.values():
            client.disconnect()
    for workload in ("W1", "W3"):
        off_median = statistics.median(times["off"][workload])
        on_median = statistics.median(times["on"][workload])
        spread = ", ".join(f"{value:.3f}" for value in times["on"][workload])
        print(
            f"{workload}: off {off_median:.3f} s, on {on_median:.3f} s, ratio {on_median / off_median:.3f}"
            f" (on runs: {spread})"
        )


if __name__ == "__main__":
    main()
