"""The front ends for existing code against the systems they stand in for, as ratios in one run (issue #30):

- joblib `Parallel` over 10,000 tiny calls: our "scaler" backend against joblib's Dask backend and `loky`;
- a `dask.array` reduction of 100 chunks: `compute(scheduler=client.get)` against Dask's distributed scheduler;
- `ray.get` of 10,000 tiny remote calls: `scaler.compat.ray` against Ray itself.

    python benchmarks/compat_frontends.py [--rounds 3] [--only joblib,array,ray]

Every system gets 2 worker processes (Dask: 2 workers of 1 thread; Ray: num_cpus=2; loky: n_jobs=2) and a warm-up
before the timed part. Each runs in its own virtual environment under benchmarks/.venvs/ (harness.systems,
FRONTEND_REQUIREMENTS: `ours-frontends`, this checkout with its joblib and dask extras; `frontends-dask`, joblib and
dask[distributed]; `ray`, Ray), built on first use and rebuilt when its requirements change. Each run is a fresh
process (harness.process: own process group, every straggler killed after it, Ray's daemons included); systems
alternate within a round. Prints the median seconds of each and each anchor's time over ours. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import process
from harness.systems import ensure_venv

BENCH_DIR = Path(__file__).resolve().parent
CALLS = 10_000
#: workload -> (system, the venv it runs in: harness.systems.FRONTEND_REQUIREMENTS)
RUNS = {
    "joblib": [("scaler", "ours-frontends"), ("dask", "frontends-dask"), ("loky", "frontends-dask")],
    "array": [("scaler", "ours-frontends"), ("dask", "frontends-dask")],
    "ray": [("scaler", "ours-frontends"), ("ray", "ray")],
}


def tiny(x: int) -> int:
    return x + 1


# ---------------------------------------------------------------- one run (in its own process)


def run_joblib(system: str) -> float:
    """One Parallel call of 10,000 calls under a fresh backend (so joblib's auto-batching ramps up from a batch of
    one, as in a program's first call), after a warm-up under another."""
    import joblib

    calls = [joblib.delayed(tiny)(i) for i in range(CALLS)]
    settings: dict[str, Any] = {"backend": system, "n_jobs": 2 if system == "loky" else -1}

    def timed_call() -> float:
        with joblib.parallel_config(**settings):
            joblib.Parallel()(calls[:200])
        with joblib.parallel_config(**settings):
            return _timed(lambda: joblib.Parallel()(calls))

    if system == "loky":
        return timed_call()
    if system == "dask":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster):
            return timed_call()
    import scaler.joblib  # noqa: F401
    from scaler import Client as ScalerClient
    from scaler import SchedulerClusterCombo

    with SchedulerClusterCombo(n_workers=2) as combo, ScalerClient(combo.get_address()) as client:
        settings["client"] = client
        return timed_call()


def run_array(system: str) -> float:
    import dask.array as da

    array = da.random.default_rng(0).random((10_000, 10_000), chunks=(1_000, 1_000))  # 100 chunks of 8 MB
    assert array.npartitions == 100
    if system == "dask":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as client:
            client.compute(da.ones(10, chunks=5).sum()).result()
            return _timed(lambda: array.mean().compute())
    from scaler import Client as ScalerClient
    from scaler import SchedulerClusterCombo

    with SchedulerClusterCombo(n_workers=2) as combo, ScalerClient(combo.get_address()) as client:
        da.ones(10, chunks=5).sum().compute(scheduler=client.get)
        return _timed(lambda: array.mean().compute(scheduler=client.get))


def run_ray(system: str) -> float:
    if system == "scaler":
        import scaler.compat.ray  # noqa: F401  (stands in for Ray, not installed here)
    import ray

    ray.init(num_cpus=2)
    try:
        remote_tiny = ray.remote(tiny)
        ray.get([remote_tiny.remote(i) for i in range(200)])
        return _timed(lambda: ray.get([remote_tiny.remote(i) for i in range(CALLS)]))
    finally:
        ray.shutdown()


def _timed(work: Callable[[], Any]) -> float:
    """Seconds the work took; its result is checked (a list of tiny(i), or the mean of uniform numbers)."""
    began = time.perf_counter()
    result = work()
    elapsed = time.perf_counter() - began
    if isinstance(result, list):
        assert result == [tiny(i) for i in range(CALLS)], "wrong results"
    else:
        assert 0.49 < float(result) < 0.51, f"wrong mean {result}"
    return elapsed


# ---------------------------------------------------------------- the driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(RUNS))
    parser.add_argument("--base-python", default=sys.executable, help="the interpreter the venvs are made from")
    parser.add_argument("--run", nargs=2, metavar=("WORKLOAD", "SYSTEM"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.run:
        workload, system = arguments.run
        seconds = {"joblib": run_joblib, "array": run_array, "ray": run_ray}[workload](system)
        print(process.MARKER + json.dumps({"seconds": seconds}), flush=True)
        return
    process.become_subreaper()
    environment = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    environment["PYTHONPATH"] = str(BENCH_DIR)  # the child imports harness.process and this module
    print(f"load before: {os.getloadavg()}", flush=True)
    for workload in arguments.only.split(","):
        times: dict[str, list[float]] = {system: [] for system, _ in RUNS[workload]}
        for _ in range(arguments.rounds):
            for system, venv in RUNS[workload]:
                python = str(ensure_venv(venv, arguments.base_python))
                process.wait_until_quiet(0.25, 20)
                outcome = process.run([python, __file__, "--run", workload, system], 600, environment)
                if outcome.payload is None:
                    print(f"{workload}/{system} failed: {outcome.stderr_tail}", flush=True)
                    continue
                times[system].append(outcome.payload["seconds"])
        medians = {system: statistics.median(values) for system, values in times.items() if values}
        ours = medians.get("scaler")
        for system, median in medians.items():
            ratio = f"  ({median / ours:.2f}x ours)" if ours and system != "scaler" else ""
            print(f"{workload:7} {system:7} median {median:7.3f} s of {times[system]}{ratio}", flush=True)
    print(f"load after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
