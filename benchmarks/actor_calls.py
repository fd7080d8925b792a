"""An actor method call's round trip against a task's (W3) in the same run, and against Ray's actor call (issue #43,
item 4: within 1.2x of a task's, faster than Ray's):

- scaler, actor: `handle.inc(i).result()` one after the other, on an actor of a 2-worker local cluster;
- scaler, task: `client.submit(inc, i).result()` one after the other (W3's measure), on the same cluster;
- Ray, actor: `ray.get(counter.inc.remote(i))` one after the other, Ray started with num_cpus=2.

    python benchmarks/actor_calls.py [--rounds 3] [--calls 2000] [--only scaler,ray]
    python benchmarks/actor_calls.py --only scaler=.venv/bin/python,ray=/path/to/ray/venv/bin/python

Each system runs in its own virtual environment under benchmarks/.venvs/ (harness.systems,
FRONTEND_REQUIREMENTS: `ours-frontends`, this checkout; `ray`, Ray), built on first use; each run is a fresh process
(harness.process: own process group, stragglers killed, Ray's daemons included), after a warm-up of 200 calls, on a
quiet machine (it waits for one). `SYSTEM=PYTHON` in `--only` runs that system with an interpreter that has it installed
instead (a checkout's own venv, another checkout's Ray venv), and `SYSTEM@LABEL=PYTHON` one more run of it under that
label (`scaler@main=/work/main/.venv/bin/python`: main's tree beside this one, alternated). Prints the median and p99 of
each, the actor/task ratio of each scaler run, and Ray's actor call over ours. `--here` runs the scaler part once with
this interpreter (no venv; a smoke check, not a figure). Not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
WARMUP = 200
#: system -> the venv it runs in (harness.systems.FRONTEND_REQUIREMENTS)
VENVS = {"scaler": "ours-frontends", "ray": "ray"}


def inc(x: int) -> int:
    return x + 1


class Counter:
    """The actor: state kept between calls (the calls' sum), as an actor's work would."""

    def __init__(self) -> None:
        self.total = 0

    def inc(self, x: int) -> int:
        self.total += x
        return x + 1


# ---------------------------------------------------------------- one run (in its own process)


def _latencies(call: Callable[[int], int], calls: int) -> list[float]:
    for i in range(WARMUP):
        assert call(i) == i + 1, "wrong result"
    latencies = []
    for i in range(calls):
        began = time.perf_counter()
        result = call(i)
        latencies.append(time.perf_counter() - began)
        assert result == i + 1, "wrong result"
    return latencies


def run_scaler(calls: int) -> dict[str, list[float]]:
    """The actor's and the task's round trips, alternating in halves so that neither gets the warmer half."""
    from scaler import Client, SchedulerClusterCombo

    with SchedulerClusterCombo(n_workers=2) as combo, Client(combo.get_address()) as client:
        counter = client.actor(Counter)
        actor: list[float] = []
        task: list[float] = []
        for half in (calls // 2, calls - calls // 2):
            actor += _latencies(lambda i: counter.inc(i).result(), half)
            task += _latencies(lambda i: client.submit(inc, i).result(), half)
        counter.stop()
        return {"actor": actor, "task": task}


def run_ray(calls: int) -> dict[str, list[float]]:
    import ray

    ray.init(num_cpus=2)
    try:
        counter = ray.remote(Counter).remote()
        return {"actor": _latencies(lambda i: ray.get(counter.inc.remote(i)), calls)}
    finally:
        ray.shutdown()


# ---------------------------------------------------------------- the driver


def _summary(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return 1000 * statistics.median(ordered), 1000 * ordered[math.ceil(0.99 * len(ordered)) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--only", default=",".join(VENVS))
    parser.add_argument("--base-python", default=sys.executable, help="the interpreter the venvs are made from")
    parser.add_argument("--here", action="store_true", help="run the scaler part once here (a smoke check)")
    parser.add_argument("--run", metavar="SYSTEM", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    runs = {"scaler": run_scaler, "ray": run_ray}
    if arguments.here:
        for kind, latencies in run_scaler(arguments.calls).items():
            print(f"scaler {kind}: median {_summary(latencies)[0]:.3f} ms (smoke check, not a figure)")
        return
    from harness import process

    if arguments.run:
        print(process.MARKER + json.dumps(runs[arguments.run](arguments.calls)), flush=True)
        return
    from harness.systems import ensure_venv

    process.become_subreaper()
    environment = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    environment["PYTHONPATH"] = str(BENCH_DIR)  # the child imports harness.process and this module
    print(f"load before: {os.getloadavg()}", flush=True)
    medians: dict[str, list[float]] = {}
    for _ in range(arguments.rounds):
        for item in arguments.only.split(","):
            label, _, given = item.partition("=")
            system = label.partition("@")[0]
            python = given or str(ensure_venv(VENVS[system], arguments.base_python))
            process.wait_until_quiet(0.25, 20)
            command = [python, __file__, "--run", system, "--calls", str(arguments.calls)]
            outcome = process.run(command, 900, environment)
            if outcome.payload is None:
                print(f"{label} failed: {outcome.stderr_tail}", flush=True)
                continue
            load = os.getloadavg()[0]
            for kind, latencies in outcome.payload.items():
                median, p99 = _summary(latencies)
                medians.setdefault(f"{label} {kind}", []).append(median)
                print(f"{label:6} {kind:5} median {median:7.3f} ms  p99 {p99:7.3f} ms  (load {load:.1f})", flush=True)
    result = {name: statistics.median(values) for name, values in medians.items()}
    for name, value in result.items():
        print(f"{name:12} median of medians {value:7.3f} ms", flush=True)
    if "scaler actor" in result and "scaler task" in result:
        print(f"actor / task: {result['scaler actor'] / result['scaler task']:.2f} (target <= 1.2)", flush=True)
    for name in (n for n in result if n.startswith("scaler") and n.endswith(" actor")):
        if "ray actor" in result:
            print(f"ray actor / {name}: {result['ray actor'] / result[name]:.2f} (target > 1)", flush=True)
    print(f"load after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
