"""W3's round trip with the client's CPU beside it: `submit(inc, i).result()` N times on a local cluster of 2 workers,
after 300 to warm up; prints the p50, the client process's CPU (every thread) and the CPU of the cluster's processes,
per round trip (psutil). Alternate two trees with PYTHONPATH to compare them (compile both trees' bytecode first:
with PYTHONDONTWRITEBYTECODE set, an uncompiled tree compiles in every process it starts).

    for r in 1 2 3; do TAG=after PYTHONPATH=. python benchmarks/w3_client_cpu.py 4000
                       TAG=before PYTHONPATH=/tmp/before python benchmarks/w3_client_cpu.py 4000; done

Not a test.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import psutil

from scaler import Client, SchedulerClusterCombo


def inc(x: int) -> int:
    return x + 1


def cpu_seconds(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    cluster = SchedulerClusterCombo(n_workers=2)
    me = psutil.Process()
    try:
        with Client(address=cluster.get_address()) as client:
            for i in range(300):
                client.submit(inc, i).result()
            children = me.children(recursive=True)
            client_before, others_before = cpu_seconds(me), sum(cpu_seconds(child) for child in children)
            latencies = []
            for i in range(calls):
                began = time.perf_counter()
                client.submit(inc, i).result()
                latencies.append(time.perf_counter() - began)
            client_cpu = (cpu_seconds(me) - client_before) / calls * 1e6
            others_cpu = (sum(cpu_seconds(child) for child in children) - others_before) / calls * 1e6
            print(
                f"{os.environ.get('TAG', '?')} p50 {statistics.median(latencies) * 1e3:.3f} ms, per round trip: "
                f"client {client_cpu:.0f} us, the cluster's processes {others_cpu:.0f} us"
            )
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
