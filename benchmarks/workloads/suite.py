"""Workloads W1-W9, written once against `adapters.Adapter`. Each returns (metrics, info): `metrics` are the
numbers the driver compares across systems, `info` is context kept in the raw results.

Timers use `time.perf_counter()`. Every workload checks its results, so a fast wrong answer is a failure.
"""

import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import bench_tasks
import days
import procs
from adapters import Adapter

N_WORKERS = 2
Measurement = tuple[dict[str, float], dict[str, Any]]

FULL_SIZES: dict[str, dict[str, Any]] = {
    "W1": {"tasks": 10_000},
    "W2": {"tasks": 10_000},
    "W3": {"calls": 500, "warmup": 20},
    "W4": {"leaves": 1024},
    "W5": {"megabytes": 100, "tasks": 20},
    "W6": {"tasks": 8, "cpu_seconds": 0.5},
    "W7": {"tasks": 10_000},
    "W8": {},
    "W9": {"n": 8},
    **days.FULL_SIZES,
}
QUICK_SIZES: dict[str, dict[str, Any]] = {
    "W1": {"tasks": 1_000},
    "W2": {"tasks": 1_000},
    "W3": {"calls": 100, "warmup": 10},
    "W4": {"leaves": 128},
    "W5": {"megabytes": 10, "tasks": 20},
    "W6": {"tasks": 4, "cpu_seconds": 0.25},
    "W7": {"tasks": 1_000},
    "W8": {},
    "W9": {"n": 6},
    **days.QUICK_SIZES,
}


class WrongResult(AssertionError):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise WrongResult(message)


def wait_for_workers(adapter: Adapter, n_workers: int, timeout_seconds: float = 60.0) -> float:
    """Warm-up: submit small batches until `n_workers` distinct processes have run a task. Returns seconds."""
    start = time.perf_counter()
    seen: set[int] = set()
    while len(seen) < n_workers:
        if time.perf_counter() - start > timeout_seconds:
            raise TimeoutError(f"only {len(seen)} of {n_workers} workers ran a warm-up task in {timeout_seconds} s")
        seen.update(adapter.gather([adapter.submit(bench_tasks.pid_after, 0.05) for _ in range(2 * n_workers)]))
    return time.perf_counter() - start


def tiny_tasks(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    n = size["tasks"]
    start = time.perf_counter()
    futures = [adapter.submit(bench_tasks.inc, i) for i in range(n)]
    submitted = time.perf_counter()
    results = adapter.gather(futures)
    elapsed = time.perf_counter() - start
    expect(results == [i + 1 for i in range(n)], "W1: wrong results")
    return {"tasks_per_s": n / elapsed}, {"tasks": n, "seconds": elapsed, "submit_seconds": submitted - start}


def mapped_tasks(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    n = size["tasks"]
    start = time.perf_counter()
    results = adapter.map(bench_tasks.inc, range(n))
    elapsed = time.perf_counter() - start
    expect(results == [i + 1 for i in range(n)], "W2: wrong results")
    return {"tasks_per_s": n / elapsed}, {"tasks": n, "seconds": elapsed}


def round_trips(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    for i in range(size["warmup"]):
        adapter.submit(bench_tasks.inc, i).result()
    latencies = []
    for i in range(size["calls"]):
        start = time.perf_counter()
        result = adapter.submit(bench_tasks.inc, i).result()
        latencies.append(time.perf_counter() - start)
        expect(result == i + 1, "W3: wrong result")
    latencies.sort()
    p99 = latencies[math.ceil(0.99 * len(latencies)) - 1]
    metrics = {"p50_ms": 1000 * statistics.median(latencies), "p99_ms": 1000 * p99}
    return metrics, {"calls": len(latencies), "max_ms": 1000 * latencies[-1]}


def tree_graph(leaves: int) -> tuple[dict[str, Any], str]:
    """Data nodes d<i> = i, leaf tasks (inc, d<i>), then (add, left, right) level by level up to one root."""
    graph: dict[str, Any] = {f"d{i}": i for i in range(leaves)}
    level = [f"n0-{i}" for i in range(leaves)]
    graph.update({key: (bench_tasks.inc, f"d{i}") for i, key in enumerate(level)})
    depth = 0
    while len(level) > 1:
        depth += 1
        parents = [f"n{depth}-{j}" for j in range(len(level) // 2)]
        graph.update({key: (bench_tasks.add, level[2 * j], level[2 * j + 1]) for j, key in enumerate(parents)})
        level = parents
    return graph, level[0]


def tree_reduction(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    leaves = size["leaves"]
    graph, root = tree_graph(leaves)
    tasks = sum(1 for node in graph.values() if isinstance(node, tuple))
    start = time.perf_counter()
    result = adapter.get(graph, root)
    elapsed = time.perf_counter() - start
    expect(result == leaves * (leaves + 1) // 2, f"W4: wrong result {result}")
    return {"seconds": elapsed}, {"leaves": leaves, "tasks": tasks}


def large_object(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    n_bytes = size["megabytes"] * procs.MB
    payload = os.urandom(n_bytes)
    start = time.perf_counter()
    reference = adapter.send_object(payload)
    sent = time.perf_counter()
    results = adapter.gather([adapter.submit(bench_tasks.size_of, reference) for _ in range(size["tasks"])])
    elapsed = time.perf_counter() - start
    expect(results == [n_bytes] * size["tasks"], "W5: wrong results")
    return {"seconds": elapsed}, {"bytes": n_bytes, "tasks": size["tasks"], "send_seconds": sent - start}


def cpu_bound(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    n, seconds = size["tasks"], size["cpu_seconds"]
    ideal = n * seconds / N_WORKERS
    start = time.perf_counter()
    results = adapter.gather([adapter.submit(bench_tasks.burn_cpu, seconds) for _ in range(n)])
    elapsed = time.perf_counter() - start
    expect(results == [seconds] * n, "W6: wrong results")
    return {"efficiency": ideal / elapsed}, {"wall_seconds": elapsed, "ideal_seconds": ideal}


def scheduler_memory(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    scheduler = adapter.scheduler_process()
    baseline = scheduler.memory_info().rss
    with procs.RssSampler(scheduler, interval=0.05) as sampler:
        throughput, w1_info = tiny_tasks(adapter, size)
    # RSS counts pages shared with other processes in full (e.g. after a fork); USS/PSS at the end, for context.
    full = scheduler.memory_full_info()
    info = {
        "final_uss_mb": full.uss / procs.MB,
        "final_pss_mb": getattr(full, "pss", 0) / procs.MB,
        "measured_process": adapter.describe_scheduler(),
        "scheduler_pid": scheduler.pid,
        "scheduler_is_client_process": scheduler.pid == os.getpid(),
        "scheduler_cmdline": " ".join(scheduler.cmdline())[:300],
        "baseline_rss_mb": baseline / procs.MB,
        "samples": sampler.samples,
        **w1_info,
        **throughput,
    }
    return {"peak_rss_mb": sampler.peak_bytes / procs.MB}, info


def start_to_first_result(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    start = time.perf_counter()
    adapter.start(N_WORKERS)
    started = time.perf_counter()
    result = adapter.submit(bench_tasks.inc, 1).result()
    elapsed = time.perf_counter() - start
    expect(result == 2, "W8: wrong result")
    return {"seconds": elapsed}, {"cluster_constructor_seconds": started - start}


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def nested_tasks(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    n = size["n"]
    start = time.perf_counter()
    result = adapter.fibonacci(n)
    elapsed = time.perf_counter() - start
    expect(result == fib(n), f"W9: fibonacci({n}) returned {result}, expected {fib(n)}")
    return {"seconds": elapsed}, {"n": n, "tasks": 2 * fib(n + 1) - 1}


@dataclasses.dataclass(frozen=True)
class Workload:
    run: Callable[[Adapter, dict[str, Any]], Measurement]
    own_cluster: bool = False  # True: `run` starts the cluster itself (W8 times the start-up)
    separate_scheduler: bool = False  # True: the scheduler must be a process of its own (W7)
    preimport: tuple[str, ...] = ()  # modules the workers import when they start, before the warm-up (U4p)


WORKLOADS: dict[str, Workload] = {
    "W1": Workload(tiny_tasks),
    "W2": Workload(mapped_tasks),
    "W3": Workload(round_trips),
    "W4": Workload(tree_reduction),
    "W5": Workload(large_object),
    "W6": Workload(cpu_bound),
    "W7": Workload(scheduler_memory, separate_scheduler=True),
    "W8": Workload(start_to_first_result, own_cluster=True),
    "W9": Workload(nested_tasks),
    **{key: Workload(run) for key, run in days.WORKLOADS.items()},
    "U4p": Workload(days.grid_search, preimport=days.U4_MODULES),
}
