"""CURVE's cost: W1 (10,000 tiny tasks submitted one by one, then gathered) and W3 (sequential round trips of
one tiny task) on a 2-worker local cluster with and without `secure=True`, alternated, median of `--repeat`.

    python benchmarks/curve_cost.py [--tasks 10000] [--round-trips 300] [--repeat 3]
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
    futures = [client.submit(inc, x) for x in range(tasks)]
    assert [future.result() for future in futures][-1] == tasks
    return tasks / (time.perf_counter() - began)


def w3(client: Client, round_trips: int) -> float:
    latencies = []
    for x in range(round_trips):
        began = time.perf_counter()
        client.submit(inc, x).result()
        latencies.append(time.perf_counter() - began)
    return statistics.median(latencies) * 1000


def measure(secure: bool, arguments: argparse.Namespace) -> tuple[float, float]:
    with SchedulerClusterCombo(n_workers=2, secure=secure) as cluster:
        with Client(cluster.get_address(), **cluster.client_keys) as client:
            w1(client, 1000)  # warm-up
            return w1(client, arguments.tasks), w3(client, arguments.round_trips)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(arguments.repeat):
        for secure in (False, True):
            runs[secure].append(measure(secure, arguments))
    plain_w1, plain_w3 = (statistics.median(values) for values in zip(*runs[False], strict=True))
    curve_w1, curve_w3 = (statistics.median(values) for values in zip(*runs[True], strict=True))
    cost = 100 * (1 - curve_w1 / plain_w1)
    print(f"W1: {plain_w1:,.0f} tasks/s plain, {curve_w1:,.0f} with CURVE ({cost:+.1f}% cost)")
    print(f"W3: p50 {plain_w3:.2f} ms plain, {curve_w3:.2f} ms with CURVE ({100 * (curve_w3 / plain_w3 - 1):+.1f}%)")


if __name__ == "__main__":
    main()
