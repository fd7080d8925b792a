"""U1's task body in a plain interpreter, on the main thread and on a second thread, under glibc's default heap
thresholds and under those a processor sets (scaler/worker/processor/heap.py): CPU, minor page faults and kernel
time per call. docs/performance.md, "The processor's heap". Not a test.

    python benchmarks/heap_faults.py [--calls 2000]

Each configuration runs in a fresh interpreter (mallopt's settings last for the process).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CONFIGURATIONS = {
    "glibc's defaults": {},
    "M_MMAP_THRESHOLD 32 MiB only": {"mmap": 32 << 20},
    "M_TRIM_THRESHOLD 128 MiB only": {"trim": 128 << 20},
    "the processor's (heap.keep_freed_heap)": {"processor": True},
}

CHILD = r"""
import ctypes, json, resource, sys, threading, time
sys.path.insert(0, sys.argv[1])
import numpy
import day_tasks
settings, calls = json.loads(sys.argv[2]), int(sys.argv[3])
libc = ctypes.CDLL("libc.so.6")
if "mmap" in settings:
    libc.mallopt(-3, settings["mmap"])
if "trim" in settings:
    libc.mallopt(-1, settings["trim"])
if settings.get("processor"):
    from scaler.worker.processor import heap
    heap.keep_freed_heap(1 << 30)
array = numpy.random.default_rng(29).random(50_000_000 // 8)
found = {}
def run(where):
    day_tasks.monte_carlo_body(array, 0)
    before, began = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
    for seed in range(calls):
        day_tasks.monte_carlo_body(array, seed)
    cpu = time.thread_time() - began
    after = resource.getrusage(resource.RUSAGE_THREAD)
    faults, kernel = after.ru_minflt - before.ru_minflt, after.ru_stime - before.ru_stime
    found[where] = (cpu / calls * 1e6, faults / calls, kernel / calls * 1e6)
run("main thread")
thread = threading.Thread(target=run, args=("second thread",))
thread.start()
thread.join()
print(json.dumps(found))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    workloads = str(Path(__file__).resolve().parent / "workloads")
    print(f"{'configuration':42s} {'thread':14s} {'CPU us/call':>12s} {'faults/call':>12s} {'kernel us':>10s}")
    for label, settings in CONFIGURATIONS.items():
        out = subprocess.run(
            [sys.executable, "-c", CHILD, workloads, json.dumps(settings), str(args.calls)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        for where, (cpu, faults, kernel) in json.loads(out).items():
            print(f"{label:42s} {where:14s} {cpu:12.0f} {faults:12.0f} {kernel:10.0f}")


if __name__ == "__main__":
    main()
