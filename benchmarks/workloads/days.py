"""Workloads shaped like users' days (issue #29), written once against `adapters.Adapter`:

* U1 Monte Carlo: 5,000 tasks of about 2 ms of numpy, all reading one 50 MB array sent once;
* U2 dataframe fan-out: 250 pandas partitions made, grouped and aggregated in tasks (one graph);
* U3 1,250 tasks, each with its own 100 KB bytes argument;
* U4 a scikit-learn grid search over the system's joblib backend;
* U4p the same on workers that imported scikit-learn when they started (ours' `preimport`, Dask's `preload`, Ray's
  `worker_process_setup_hook`), before the warm-up: what a desk that searches all day sets once.

Each reports wall time, CPU efficiency (the CPU of the task bodies over all CPU the run's process tree burnt) and
the peak memory of the run's processes (`procs.TreeSampler`: PSS, each shared page counted once, and RSS, counted in
every process that maps it; per process and summed by kind of process), and checks its results against the same
computation done in this process, so a fast wrong answer fails the run.
"""

import os
import time
from typing import Any

import day_tasks
import procs
from adapters import Adapter

Measurement = tuple[dict[str, float], dict[str, Any]]

FULL_SIZES: dict[str, dict[str, Any]] = {
    "U1": {"tasks": 5_000, "megabytes": 50, "checked": 40},
    "U2": {"partitions": 250, "rows": 20_000},
    "U3": {"tasks": 1_250, "bytes": 100_000},
    "U4": {"samples": 1_500, "features": 20, "c": [0.1, 1.0, 10.0, 100.0], "gamma": [0.001, 0.01, 0.1, 1.0], "cv": 5},
}
FULL_SIZES["U4p"] = FULL_SIZES["U4"]
QUICK_SIZES: dict[str, dict[str, Any]] = {
    "U1": {"tasks": 500, "megabytes": 10, "checked": 20},
    "U2": {"partitions": 50, "rows": 5_000},
    "U3": {"tasks": 250, "bytes": 100_000},
    "U4": {"samples": 400, "features": 10, "c": [1.0, 10.0], "gamma": [0.01, 0.1], "cv": 3},
}
QUICK_SIZES["U4p"] = QUICK_SIZES["U4"]


class WrongResult(AssertionError):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise WrongResult(message)


def _column(rows: list[dict[str, object]], key: str) -> list[float]:
    return [float(row[key]) for row in rows]  # type: ignore[arg-type]


def measured(sampler: procs.TreeSampler, seconds: float, task_cpu: float) -> Measurement:
    burnt = sampler.cpu_seconds()
    rows = sampler.per_process()
    metrics = {
        "seconds": seconds,
        "cpu_efficiency": task_cpu / burnt if burnt > 0 else 0.0,
        # the run's memory: the largest sum over its processes at one sample, PSS (the measure) and RSS
        "peak_pss_total_mb": sampler.peak_pss_total / procs.MB,
        "peak_rss_total_mb": sampler.peak_rss_total / procs.MB,
        # each process's own peak, summed (as reported before: processes that peak at different times add up)
        "peak_pss_sum_mb": sum(_column(rows, "peak_pss_mb")),
        "peak_rss_sum_mb": sum(_column(rows, "peak_rss_mb")),
        "peak_rss_max_mb": max(_column(rows, "peak_rss_mb")),
    }
    info = {"task_cpu_s": task_cpu, "all_cpu_s": burnt, "processes": rows, "by_kind": sampler.per_kind()}
    return metrics, {**info, "sampler": sampler.cost()}


def monte_carlo(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    import numpy

    n_tasks = size["tasks"]
    array = numpy.random.default_rng(29).random(size["megabytes"] * procs.MB // 8)
    with procs.TreeSampler() as sampler:
        start = time.perf_counter()
        shared = adapter.send_object(array)
        results = adapter.gather([adapter.submit(day_tasks.monte_carlo, shared, seed) for seed in range(n_tasks)])
        seconds = time.perf_counter() - start
    expect(len(results) == n_tasks, f"U1: {len(results)} results for {n_tasks} tasks")
    step = max(1, n_tasks // size["checked"])
    for seed in range(0, n_tasks, step):
        expected = day_tasks.monte_carlo_body(array, seed)
        expect(results[seed][0] == expected, f"U1: task {seed} returned {results[seed][0]}, expected {expected}")
    return measured(sampler, seconds, sum(cpu for _, cpu in results))


def dataframe_fan_out(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    n, rows = size["partitions"], size["rows"]
    graph: dict[str, Any] = {}
    for index in range(n):
        graph[f"made-{index}"] = (day_tasks.make_partition, index, rows)
        graph[f"grouped-{index}"] = (day_tasks.group_partition, f"made-{index}")
    graph["total"] = (day_tasks.combine_groups, *(f"grouped-{index}" for index in range(n)))
    with procs.TreeSampler() as sampler:
        start = time.perf_counter()
        total, task_cpu = adapter.get(graph, "total")
        seconds = time.perf_counter() - start
    frame, _ = day_tasks.make_partition(0, rows * n)  # the same data as one partition, aggregated here
    expected = frame.groupby("key").agg(a_sum=("a", "sum"), b_sum=("b", "sum"), rows=("a", "size"))
    expect(total.equals(expected), f"U2: the aggregate differs from the local one:\n{total.head()}\n{expected.head()}")
    return measured(sampler, seconds, task_cpu)


def own_arguments(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    import zlib

    payloads = [os.urandom(size["bytes"]) for _ in range(size["tasks"])]
    with procs.TreeSampler() as sampler:
        start = time.perf_counter()
        results = adapter.gather([adapter.submit(day_tasks.checksum, payload) for payload in payloads])
        seconds = time.perf_counter() - start
    expected = [zlib.crc32(payload) for payload in payloads]
    expect([value for value, _ in results] == expected, "U3: wrong checksums")
    return measured(sampler, seconds, sum(cpu for _, cpu in results))


def grid_search(adapter: Adapter, size: dict[str, Any]) -> Measurement:
    """GridSearchCV(SVC) run serially here first (its thread CPU is the task CPU, its results the reference), then
    with n_jobs=-1 on the system's joblib backend; the mean test scores and best parameters must be equal."""
    from sklearn.datasets import make_classification
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    x, y = make_classification(n_samples=size["samples"], n_features=size["features"], random_state=29)
    grid = {"C": size["c"], "gamma": size["gamma"]}
    began = time.thread_time()
    serial = GridSearchCV(SVC(), grid, cv=size["cv"], n_jobs=None).fit(x, y)
    serial_cpu = time.thread_time() - began
    with procs.TreeSampler() as sampler:
        start = time.perf_counter()
        searched = adapter.grid_search(GridSearchCV(SVC(), grid, cv=size["cv"], n_jobs=-1), x, y)
        seconds = time.perf_counter() - start
    expect(searched.best_params_ == serial.best_params_, f"U4: best {searched.best_params_} != {serial.best_params_}")
    scores, reference = searched.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"]
    expect(list(scores) == list(reference), f"U4: mean test scores differ: {list(scores)} != {list(reference)}")
    metrics, info = measured(sampler, seconds, serial_cpu)
    fits = len(reference) * size["cv"]
    return metrics, {**info, "fits": fits, "serial_cpu_s": serial_cpu, "task_cpu_is": "the serial fit's CPU"}


WORKLOADS = {"U1": monte_carlo, "U2": dataframe_fan_out, "U3": own_arguments, "U4": grid_search}
#: U4p: U4 on workers that imported these when they started (each system's own means, `adapters`), before the warm-up
U4_MODULES = ("sklearn.svm", "sklearn.model_selection")
