"""Where an argument should stop travelling inside its task message: U3's shape (tasks each given their own random
`bytes` and returning its CRC-32) at several argument sizes, each size sent both ways in one cluster, alternated:

  * inline: inside the task message (client -> scheduler -> worker agent -> processor);
  * storage: through object storage (from 64 KiB on, a shared-memory file the client writes and `adopt`s, which the
    processor maps; below that, frames in the server's memory).

    .venv/bin/python benchmarks/inline_crossover.py --sizes 8000,30000,60000,100000,200000 --tasks 1000 --rounds 3

The route is chosen by lowering or raising the client's inline limit for the run (`task_encoder.INLINE_LIMIT_BYTES`,
read at each call), so this runs against any tree of ours. Prints the median wall time of each (size, route) and
its submit part. See docs/architecture.md ("Dispatch and data path") for what it decided.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import zlib

from scaler import Client, SchedulerClusterCombo
from scaler.payload import task_encoder

ROUTES = {"inline": 1 << 30, "storage": 1024}  #: the client's inline limit for each route


def checksum(data: bytes) -> int:
    return zlib.crc32(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8000,30000,60000,100000,200000", help="argument sizes in bytes")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    seconds: dict[tuple[int, str], list[tuple[float, float]]] = {}
    started = os.getloadavg()[0]
    cluster = SchedulerClusterCombo(n_workers=args.workers, logging_level="WARNING")
    original = task_encoder.INLINE_LIMIT_BYTES
    try:
        with Client(address=cluster.get_address()) as client:
            client.submit(checksum, b"warm-up").result()
            for round_number in range(args.rounds):
                for size in sizes:
                    payloads = [os.urandom(size) for _ in range(args.tasks)]
                    for route, limit in ROUTES.items():
                        task_encoder.INLINE_LIMIT_BYTES = limit
                        start = time.perf_counter()
                        futures = [client.submit(checksum, payload) for payload in payloads]
                        submitted = time.perf_counter()
                        values = [future.result() for future in futures]
                        done = time.perf_counter()
                        if values != [zlib.crc32(payload) for payload in payloads]:
                            raise SystemExit(f"wrong checksums ({size} bytes, {route})")
                        seconds.setdefault((size, route), []).append((done - start, submitted - start))
                print(f"round {round_number + 1} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        task_encoder.INLINE_LIMIT_BYTES = original
        cluster.shutdown()
    print(f"\n{args.tasks} tasks per run, {args.workers} workers; load average {started:.1f} at the start")
    print(f"{'bytes':>8} {'route':8} {'median s':>9} {'submit s':>9}  all runs (s)")
    for (size, route), runs in sorted(seconds.items()):
        total = statistics.median(run[0] for run in runs)
        submit = statistics.median(run[1] for run in runs)
        print(f"{size:8d} {route:8} {total:9.2f} {submit:9.2f}  {', '.join(f'{run[0]:.2f}' for run in runs)}")


if __name__ == "__main__":
    main()
