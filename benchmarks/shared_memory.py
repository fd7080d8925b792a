"""Objects in shared memory (issue 40): put/get of a 100 MB object and a numpy fan-out, ours against Ray.

    .venv/bin/python benchmarks/shared_memory.py [--systems ours,ray] [--rounds 3] [--workers 4] [--size 100MB]
        [--shared 50MB] [--tasks 1250] [--argument 300KB] [--save results.json]

Each run is a fresh process of the system's own venv (benchmarks/.venvs/<system>, built on first use as run.py does;
`ours` is this tree, editable), the systems alternated round by round; the table shows the median of the rounds.
A system `NAME=DIRECTORY` is ours from another source tree (this venv, PYTHONPATH=DIRECTORY; e.g.
`before=/tmp/before`, a `git archive` of main), to compare a change with what it changes in one run; `NAME=FILE` runs
that system with the python FILE as it is (e.g. `ray=/work/main/benchmarks/.venvs/ray/bin/python`: no venv built).
`--tasks 0` skips the fan-out.
One run, on a local cluster of `--workers` single-threaded workers (ours: SchedulerClusterCombo; Ray: `ray.init`):

- put: the client stores a `--size` numpy array (`send_object` / `ray.put`), in MB/s;
- get: the client reads it back (`scaler.compat.ray_session.read_stored` / `ray.get`), in MB/s;
- task read: one task sums the array it is given by reference (the first read maps or receives it), in MB/s of the
  wall time of the call (a do-nothing task's time is shown beside it);
- fan-out: `--tasks` tasks, each given the shared `--shared` array by reference and an array of its own of
  `--argument` bytes by value, each returning an array of `--argument` bytes (results over the inline limit:
  stored, not inline), in tasks per second, all submitted then all gathered.

Never a test: the machine must be quiet (timings on a shared machine are noise). The processes' CPU is not sampled
here; run.py's U1-U4 do that.
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
from typing import Any

MB = 1000**2
MARKER = "SHARED-MEMORY-RESULT "
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- what the tasks do (the same for both systems)


def nothing() -> int:
    return 0


def total(array: Any) -> float:
    return float(array.sum())


def fan_task(shared: Any, own: Any) -> Any:
    """Reads the shared array (a strided sum: touches every page) and its own, returns an array of its own size."""
    return own * 2.0 + float(shared[::512].sum())


# ---------------------------------------------------------------- one run of one system


class Ours:
    def __init__(self, workers: int) -> None:
        from scaler import Client, SchedulerClusterCombo
        from scaler.compat.ray_session import read_stored

        self.cluster = SchedulerClusterCombo(n_workers=workers)
        self.client = Client(address=self.cluster.get_address())
        self._read_stored = read_stored  # imported here: its first import (5 ms) is not the get's time

    def put(self, value: Any) -> Any:
        return self.client.send_object(value)

    def get(self, reference: Any) -> Any:
        return self._read_stored(self.client, reference)

    def call(self, fn: Any, *args: Any) -> Any:
        return self.client.submit(fn, *args).result()

    def fan_out(self, fn: Any, shared: Any, owns: list[Any]) -> list[Any]:
        futures = [self.client.submit(fn, shared, own) for own in owns]
        return [future.result() for future in futures]

    def stop(self) -> None:
        self.client.disconnect()
        self.cluster.shutdown()


class Ray:
    def __init__(self, workers: int) -> None:
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        self.ray = ray
        self._remotes: dict[Any, Any] = {}

    def _remote(self, fn: Any) -> Any:
        if fn not in self._remotes:
            self._remotes[fn] = self.ray.remote(num_cpus=1)(fn)
        return self._remotes[fn]

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def get(self, reference: Any) -> Any:
        return self.ray.get(reference)

    def call(self, fn: Any, *args: Any) -> Any:
        return self.ray.get(self._remote(fn).remote(*args))

    def fan_out(self, fn: Any, shared: Any, owns: list[Any]) -> list[Any]:
        remote = self._remote(fn)
        return list(self.ray.get([remote.remote(shared, own) for own in owns]))

    def stop(self) -> None:
        self.ray.shutdown()


def timed(action: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    value = action()
    return time.perf_counter() - began, value


def run_one(system: str, arguments: argparse.Namespace) -> dict[str, Any]:
    import numpy

    generator = numpy.random.default_rng(1)
    big = generator.random(arguments.size // 8)
    shared = generator.random(arguments.shared // 8)
    owns = [generator.random(arguments.argument // 8) for _ in range(arguments.tasks)]
    backend = Ray(arguments.workers) if system == "ray" else Ours(arguments.workers)
    try:
        backend.call(nothing)  # warm: every worker is up
        backend.fan_out(fan_task, shared[:1024], owns[: arguments.workers * 2])
        put_seconds, reference = timed(lambda: backend.put(big))
        get_seconds, read = timed(lambda: backend.get(reference))
        assert read.shape == big.shape
        nothing_seconds, _ = timed(lambda: backend.call(nothing))
        task_seconds, summed = timed(lambda: backend.call(total, reference))
        assert abs(summed - float(big.sum())) < 1e-6 * abs(summed) + 1e-6
        shared_reference = backend.put(shared)
        fan_seconds, results = timed(lambda: backend.fan_out(fan_task, shared_reference, owns))
        assert len(results) == len(owns) and (not owns or results[-1].shape == owns[-1].shape)
    finally:
        backend.stop()
    return {
        "system": system,
        "put_mb_s": arguments.size / MB / put_seconds,
        "get_mb_s": arguments.size / MB / get_seconds,
        "task_read_mb_s": arguments.size / MB / task_seconds,
        "task_read_seconds": task_seconds,
        "nothing_seconds": nothing_seconds,
        "fan_out_tasks_s": arguments.tasks / fan_seconds if arguments.tasks else 0.0,
        "fan_out_seconds": fan_seconds,
    }


# ---------------------------------------------------------------- the driver


def python_of(system: str) -> str:
    sys.path.insert(0, str(HERE))
    from harness.systems import FRONTEND_REQUIREMENTS, REQUIREMENTS, ensure_venv  # noqa: F401

    if "=" in system or (system == "ours" and os.environ.get("SCALER_BENCH_OURS_CURRENT", "1") == "1"):
        return sys.executable  # this tree's own .venv (editable; another tree through PYTHONPATH)
    return str(ensure_venv(system, sys.executable))


def drive(arguments: argparse.Namespace) -> None:
    specs = arguments.systems.split(",")
    systems = [spec.split("=", 1)[0] for spec in specs]
    trees = {spec.split("=", 1)[0]: spec.split("=", 1)[1] for spec in specs if "=" in spec}
    pythons = {spec.split("=", 1)[0]: python_of(spec) for spec in specs}
    for name, path in list(trees.items()):
        if os.path.isfile(path):  # a python given as is
            pythons[name] = trees.pop(name)
    runs: dict[str, list[dict[str, Any]]] = {system: [] for system in systems}
    passed = [f"--{name}={getattr(arguments, name)}" for name in ("workers", "size", "shared", "tasks", "argument")]
    for round_number in range(arguments.rounds):
        order = systems if round_number % 2 == 0 else list(reversed(systems))
        for system in order:
            environment = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            if system in trees:  # ours from another tree: its processes (and the cluster's) import that tree
                environment["PYTHONPATH"] = os.path.abspath(trees[system])
            done = subprocess.run(
                [pythons[system], __file__, "--one", system, *passed], capture_output=True, text=True,
                env=environment, timeout=1800,
            )  # fmt: skip
            lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
            if done.returncode != 0 or not lines:
                print(f"{system}: run {round_number + 1} failed:\n{done.stderr[-4000:]}", file=sys.stderr)
                continue
            runs[system].append(json.loads(lines[-1][len(MARKER) :]))
            print(f"round {round_number + 1}: {system} done", file=sys.stderr)
    keys = ["put_mb_s", "get_mb_s", "task_read_mb_s", "nothing_seconds", "fan_out_tasks_s"]
    print(f"{'system':<8}" + "".join(f"{key:>18}" for key in keys))
    for system in systems:
        if runs[system]:
            print(f"{system:<8}" + "".join(f"{statistics.median(r[key] for r in runs[system]):>18.3f}" for key in keys))
    if arguments.save:
        Path(arguments.save).write_text(json.dumps({"arguments": vars(arguments), "runs": runs}, indent=2))


def main() -> None:
    from_size = _byte_size
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default="ours,ray")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--size", type=from_size, default=100 * MB)
    parser.add_argument("--shared", type=from_size, default=50 * MB)
    parser.add_argument("--tasks", type=int, default=1250)
    parser.add_argument("--argument", type=from_size, default=300 * 1000)
    parser.add_argument("--save", default="")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        result = run_one(arguments.one, arguments)
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), (MARKER + json.dumps(result) + "\n").encode())
        os._exit(0)  # the clusters are stopped; skip the interpreter's slow teardown of their threads
    drive(arguments)


def _byte_size(text: str) -> int:
    units = {"KB": 1000, "MB": MB, "GB": 1000**3, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
    upper = text.strip().upper()
    for unit, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if upper.endswith(unit):
            return int(float(upper[: -len(unit)]) * factor)
    return int(upper)


if __name__ == "__main__":
    main()
