"""U3's CPU per process: 1,250 tasks, each given its own 100 KB `bytes` (new ones each round), on a local cluster of 2
workers, repeated; prints the wall time and the CPU (user + system) each kind of process burnt per round, summed over
the processes of that kind. The figures to read on a busy machine are the CPU ones.

    .venv/bin/python benchmarks/u3_cpu.py --rounds 3
    # a change before/after, alternated (SCALER_BENCH_BEFORE names a worktree; run.py builds both venvs):
    for i in 1 2; do for v in ours ours-before; do benchmarks/.venvs/$v/bin/python benchmarks/u3_cpu.py; done; done

The first round after the cluster starts is measured like the others (the function is stored before it). See
docs/performance.md ("U3: adoptMany, fingerprints").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent / "workloads"))

import day_tasks


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=1250)
    parser.add_argument("--size", type=int, default=100_000, help="bytes of each task's argument")
    return parser.parse_args()


def cpu_by_process(me: psutil.Process) -> dict[int, tuple[str, float]]:
    found = {}
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
            name = "client" if process.pid == me.pid else process.name()
            found[process.pid] = (name, times.user + times.system)
        except psutil.NoSuchProcess:
            continue
    return found


def main() -> None:
    from scaler import Client, SchedulerClusterCombo

    args = parse_args()
    cluster = SchedulerClusterCombo(n_workers=2, logging_level="WARNING")
    client = Client(address=cluster.get_address())
    me = psutil.Process()
    try:
        client.submit(day_tasks.checksum, b"warm-up").result()
        print(f"{sys.prefix}: load average {os.getloadavg()[0]:.1f}")
        for number in range(1, args.rounds + 1):
            payloads = [os.urandom(args.size) for _ in range(args.tasks)]
            before = cpu_by_process(me)
            began = time.perf_counter()
            results = [future.result() for future in [client.submit(day_tasks.checksum, p) for p in payloads]]
            wall = time.perf_counter() - began
            after = cpu_by_process(me)
            if [value for value, _ in results] != [zlib.crc32(payload) for payload in payloads]:
                raise AssertionError("wrong checksums")
            used: dict[str, float] = {}
            for pid, (name, cpu) in after.items():
                used[name] = used.get(name, 0.0) + cpu - before.get(pid, (name, cpu))[1]
            shown = ", ".join(f"{name} {cpu:.2f}" for name, cpu in sorted(used.items()) if cpu >= 0.005)
            total = sum(used.values())
            print(f"[{number}/{args.rounds}] {wall:.3f} s; CPU (s): {shown}; total {total:.2f}", flush=True)
    finally:
        client.disconnect()
        cluster.shutdown()


if __name__ == "__main__":
    main()
