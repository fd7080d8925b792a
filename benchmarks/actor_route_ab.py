"""An actor call's round trip and CPU per call, this checkout against an earlier tree of ours, alternated in one run:

    git archive <commit> scaler | tar -x -C /tmp/before     # the earlier tree (its `scaler` package only)
    python benchmarks/actor_route_ab.py --before /tmp/before [--rounds 4] [--calls 2000]

Each run is a fresh process of this interpreter (so both sides import the same dependencies): `handle.inc(i).result()`
one after the other on an actor of a 2-worker local cluster, after 200 calls of warm-up; the earlier tree's runs put
it first on PYTHONPATH. Prints each run's median round trip and CPU per call (user + system of every process of the
run: client, scheduler, storage, agents, processors), then the medians of both. Made for issue #43's direct route
(an actor's calls on its processor's own link); it measures any change of the actor's path the same way. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WARMUP = 200


class Counter:
    def __init__(self) -> None:
        self.total = 0

    def inc(self, x: int) -> int:
        self.total += x
        return x + 1


def run(calls: int) -> dict[str, float]:
    """One run, in this process: the median round trip (ms) and the CPU of the run's processes per call (µs)."""
    import psutil

    from scaler import Client, SchedulerClusterCombo

    with SchedulerClusterCombo(n_workers=2, logging_level="WARNING") as combo, Client(combo.get_address()) as client:
        counter = client.actor(Counter)
        for i in range(WARMUP):
            assert counter.inc(i).result() == i + 1, "wrong result"
        me = psutil.Process()
        processes = [me, *me.children(recursive=True)]

        def cpu() -> float:
            total = 0.0
            for process in processes:
                try:
                    times = process.cpu_times()
                except psutil.Error:
                    continue
                total += times.user + times.system
            return total

        before = cpu()
        latencies = []
        for i in range(calls):
            began = time.perf_counter()
            assert counter.inc(i).result() == i + 1, "wrong result"
            latencies.append(time.perf_counter() - began)
        spent = cpu() - before
        counter.stop()
    return {"median_ms": 1000 * statistics.median(latencies), "cpu_us_per_call": 1e6 * spent / calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="a source tree whose `scaler` package is the earlier code")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.run:
        print(json.dumps(run(arguments.calls)), flush=True)
        return
    sides = {"this checkout": "", "before": str(Path(arguments.before).resolve())}
    figures: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    print(f"load before: {os.getloadavg()}", flush=True)
    for number in range(arguments.rounds):
        order = list(sides.items()) if number % 2 == 0 else list(reversed(sides.items()))
        for side, tree in order:
            environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            if tree:
                environment["PYTHONPATH"] = tree
            command = [sys.executable, __file__, "--run", "--before", arguments.before, "--calls", str(arguments.calls)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment, cwd="/")
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                print(f"{side}: failed: {done.stderr[-800:]}", flush=True)
                continue
            figure = json.loads(lines[-1])
            figures[side].append(figure)
            print(f"{side:14} {figure['median_ms']:.3f} ms, {figure['cpu_us_per_call']:.0f} µs CPU a call", flush=True)
    for side, runs in figures.items():
        if runs:
            median = statistics.median(r["median_ms"] for r in runs)
            cpu = statistics.median(r["cpu_us_per_call"] for r in runs)
            print(f"{side:14} median of medians {median:.3f} ms, CPU per call {cpu:.0f} µs ({len(runs)} runs)")
    print(f"load after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
