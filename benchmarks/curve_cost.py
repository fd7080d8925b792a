"""CURVE's cost: W1 (10,000 tiny tasks submitted one by one, then gathered) and W3 (sequential round trips of
one tiny task) on a 2-worker local cluster as it starts by default (secure, with the user's keys) and with
`insecure=True`, alternated, median of `--repeat`, and their ratio.

    python benchmarks/curve_cost.py [--tasks 10000] [--round-trips 300] [--repeat 3]

The default cluster makes the user's keys at first use in $XDG_CONFIG_HOME/scaler/keys (~/.config/scaler/keys).
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
    with SchedulerClusterCombo(n_workers=2, insecure=not secure) as cluster:
        with Client(cluster.get_address()) as client:  # finds the keys of a secure cluster by itself
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
    print(f"W1: {plain_w1:,.0f} tasks/s insecure, {curve_w1:,.0f} secure (default): ratio {curve_w1 / plain_w1:.3f} "
          f"({cost:+.1f}% cost)")  # fmt: skip
    print(f"W3: p50 {plain_w3:.2f} ms insecure, {curve_w3:.2f} ms secure (default): ratio {curve_w3 / plain_w3:.3f}")
    for name, index in (("W1 tasks/s", 0), ("W3 p50 ms", 1)):
        each = ", ".join(f"{i[index]:.4g}/{s[index]:.4g}" for i, s in zip(runs[False], runs[True], strict=True))
        print(f"  {name} per round (insecure/secure): {each}")


if __name__ == "__main__":
    main()
