"""A/B runs of W1 (many tiny tasks at once) and W3 (sequential round trips) on variants of our own client, for
the scripts that measure what one feature costs (story_cost, log_forwarding_cost): a warm-up, then rounds with the
variants alternated (the order reversed every other round), every time kept. The task functions come from the
script (its `__main__` travels by value; this module is not importable on a worker)."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

#: A variant: a client and the function its tasks run (value -> value + 1).
Variant = tuple[Any, Callable[[int], int]]
WORKLOADS = ("W1", "W3")
#: seconds of each run, by variant and workload
Times = dict[str, dict[str, list[float]]]


def parse_arguments(description: str) -> argparse.Namespace:
    """--tasks (W1), --calls (W3), --repeat (rounds), --workers (of each local cluster)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    return parser.parse_args()


def w1_seconds(client: Any, function: Callable[[int], int], tasks: int) -> float:
    began = time.perf_counter()
    futures = [client.submit(function, i) for i in range(tasks)]
    assert [future.result() for future in futures][-1] == tasks
    return time.perf_counter() - began


def w3_seconds(client: Any, function: Callable[[int], int], calls: int) -> float:
    began = time.perf_counter()
    for i in range(calls):
        assert client.submit(function, i).result() == i + 1
    return time.perf_counter() - began


def alternated(variants: Mapping[str, Variant], tasks: int, calls: int, repeat: int) -> Times:
    times: Times = {name: {workload: [] for workload in WORKLOADS} for name in variants}
    for client, function in variants.values():
        w1_seconds(client, function, 200)
    for round_number in range(repeat):
        order = list(variants) if round_number % 2 == 0 else list(reversed(variants))
        for name in order:
            client, function = variants[name]
            times[name]["W1"].append(w1_seconds(client, function, tasks))
            times[name]["W3"].append(w3_seconds(client, function, calls))
    return times


def medians(times: Times) -> dict[str, dict[str, float]]:
    return {name: {workload: statistics.median(runs) for workload, runs in by.items()} for name, by in times.items()}
