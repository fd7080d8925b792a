"""What `Client.forward_logging` costs W1 (many tiny tasks) and W3 (sequential round trips): one local cluster,
three clients (forwarding off; on with tasks that log nothing; on with tasks that log one INFO record each),
runs alternated, median of `--repeat` runs each, reported as ratios to "off".

    python benchmarks/log_forwarding_cost.py [--tasks 2000] [--calls 200] [--repeat 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from scaler import Client, SchedulerClusterCombo


def inc(value: int) -> int:
    return value + 1


def inc_logged(value: int) -> int:
    import logging

    logging.getLogger("bench.task").info("inc %d", value)
    return value + 1


def w1(client: Client, function: object, tasks: int) -> float:
    began = time.perf_counter()
    futures = [client.submit(function, i) for i in range(tasks)]  # type: ignore[arg-type]
    assert [future.result() for future in futures][-1] == tasks
    return time.perf_counter() - began


def w3(client: Client, function: object, calls: int) -> float:
    began = time.perf_counter()
    for i in range(calls):
        assert client.submit(function, i).result() == i + 1  # type: ignore[arg-type]
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    arguments = parser.parse_args()
    logging.getLogger("bench").addHandler(logging.NullHandler())
    logging.getLogger("bench").propagate = False  # the forwarded records are handled, not printed
    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster:
        off, on = Client(cluster.get_address()), Client(cluster.get_address())
        on.forward_logging("bench", logging.INFO)
        variants = {"off": (off, inc), "on, silent tasks": (on, inc), "on, 1 record/task": (on, inc_logged)}
        times: dict[str, dict[str, list[float]]] = {name: {"W1": [], "W3": []} for name in variants}
        for client, function in variants.values():  # warm-up
            w1(client, function, 200)
        for _ in range(arguments.repeat):
            for name, (client, function) in variants.items():
                times[name]["W1"].append(w1(client, function, arguments.tasks))
                times[name]["W3"].append(w3(client, function, arguments.calls))
        off.disconnect()
        on.disconnect()
    base = {workload: statistics.median(times["off"][workload]) for workload in ("W1", "W3")}
    for name in variants:
        cells = []
        for workload in ("W1", "W3"):
            median = statistics.median(times[name][workload])
            cells.append(f"{workload} {median:.3f} s ({median / base[workload]:.3f})")
        print(f"{name:>20}: " + ",  ".join(cells))


if __name__ == "__main__":
    main()
