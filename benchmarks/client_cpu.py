"""The client's own CPU per task, thread by thread: W1 (tiny `inc` tasks, 10,000 submitted then gathered), U1 (tasks
each reading a window of one shared array sent once with `send_object`, about 2 ms of numpy each) and U3 (tasks each
given their own 100 KB `bytes`). Reads each thread's CPU (user + system, /proc/self/task) before and after every
round, so the figures are the client's alone (no sampler thread, no profiler), split into the user's thread, the
client's I/O thread, the put pipeline's threads and the rest.

    .venv/bin/python benchmarks/client_cpu.py W1 --rounds 3
    .venv/bin/python benchmarks/client_cpu.py U1 --tasks 2000
    .venv/bin/python benchmarks/client_cpu.py U3
    # before/after, alternated (another checkout's venv, e.g. run.py's `ours-before`):
    for i in 1 2; do for py in .venv/bin/python /path/to/before/venv/bin/python; do
        $py benchmarks/client_cpu.py W1; done; done

A local cluster of 2 workers; a warm-up round first (not shown). Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent / "workloads"))

import day_tasks

DEFAULT_TASKS = {"W1": 10_000, "U1": 2_000, "U3": 1_250}


def inc(x: int) -> int:
    return x + 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=sorted(DEFAULT_TASKS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=0, help="per round (default: W1 10,000, U1 2,000, U3 1,250)")
    parser.add_argument("--megabytes", type=int, default=50, help="U1: the shared array's size")
    parser.add_argument("--workers", type=int, default=2)
    return parser.parse_args()


def thread_cpu() -> dict[int, float]:
    return {thread.id: thread.user_time + thread.system_time for thread in psutil.Process().threads()}


def thread_kind(native_id: int) -> str:
    for thread in threading.enumerate():
        if thread.native_id == native_id:
            name = thread.name
            if thread is threading.main_thread():
                return "user thread"
            if "puts" in name:
                return "put pipeline"
            if name.startswith("scaler-client-"):
                return "client I/O thread"
            return f"other: {name}"
    return "other: not Python's (ZeroMQ)"


def inputs(workload: str, tasks: int) -> list[bytes]:
    """U3's arguments, made before the round is measured (os.urandom of 100 KB costs about what its put does)."""
    return [os.urandom(100_000) for _ in range(tasks)] if workload == "U3" else []


def one_round(client: Any, workload: str, tasks: int, shared: Any, array: Any, payloads: list[bytes]) -> float:
    """Runs the round; returns how long its submits took (wall)."""
    began = time.perf_counter()
    if workload == "W1":
        futures = [client.submit(inc, i) for i in range(tasks)]
    elif workload == "U1":
        futures = [client.submit(day_tasks.monte_carlo, shared, seed) for seed in range(tasks)]
    else:
        futures = [client.submit(day_tasks.checksum, payload) for payload in payloads]
    submitted = time.perf_counter() - began
    results = [future.result() for future in futures]
    if workload == "W1" and results[-1] != tasks:
        raise AssertionError("wrong result")
    if workload == "U1" and results[7][0] != day_tasks.monte_carlo_body(array, 7):
        raise AssertionError("wrong result")
    if workload == "U3" and results[3][0] != zlib.crc32(payloads[3]):
        raise AssertionError("wrong checksum")
    return submitted


def main() -> None:
    from scaler import Client, SchedulerClusterCombo

    args = parse_args()
    tasks = args.tasks or DEFAULT_TASKS[args.workload]
    array = shared = None
    cluster = SchedulerClusterCombo(n_workers=args.workers, logging_level="WARNING")
    client = Client(address=cluster.get_address())
    try:
        if args.workload == "U1":
            import numpy

            array = numpy.random.default_rng(29).random(args.megabytes * 1024 * 1024 // 8)
            shared = client.send_object(array)
        warm_up = min(tasks, 1000)
        one_round(client, args.workload, warm_up, shared, array, inputs(args.workload, warm_up))
        print(f"{sys.prefix}: {args.workload}, {tasks:,} tasks a round, load average {os.getloadavg()[0]:.1f}")
        totals: dict[str, float] = {}
        for number in range(1, args.rounds + 1):
            payloads = inputs(args.workload, tasks)
            before, began = thread_cpu(), time.perf_counter()
            submitted = one_round(client, args.workload, tasks, shared, array, payloads)
            wall, after = time.perf_counter() - began, thread_cpu()
            used: dict[str, float] = {}
            for native_id, cpu in after.items():
                kind = thread_kind(native_id)
                used[kind] = used.get(kind, 0.0) + cpu - before.get(native_id, 0.0)
            for kind, cpu in used.items():
                totals[kind] = totals.get(kind, 0.0) + cpu
            shown = ", ".join(f"{kind} {1e6 * cpu / tasks:.0f}" for kind, cpu in sorted(used.items()) if cpu > 0)
            print(f"[{number}/{args.rounds}] {wall:.2f} s (submits {submitted:.2f} s); client us/task: {shown}; "
                  f"total {1e6 * sum(used.values()) / tasks:.0f}", flush=True)  # fmt: skip
        count = tasks * args.rounds
        shown = ", ".join(f"{kind} {1e6 * cpu / count:.0f}" for kind, cpu in sorted(totals.items()) if cpu > 0)
        print(f"all rounds: client us/task: {shown}; total {1e6 * sum(totals.values()) / count:.0f}")
    finally:
        client.disconnect()
        cluster.shutdown()


if __name__ == "__main__":
    main()
