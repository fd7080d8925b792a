"""A 1,000,000-item `map` from one client: its throughput and the client's memory.

    python benchmarks/big_map.py [--items 1000000] [--workers 2] [--generator]

Prints the items per second and the client process's peak RSS growth during the map, against the size of its
input and output lists (which any `map` returning a list must hold). With `--generator` the input is a generator
(its length unknown to `map`, which then reads it one chunk ahead: no input list at all). Not a test.
"""

from __future__ import annotations

import argparse
import threading
import time

import psutil

from scaler import Client, SchedulerClusterCombo


def inc(x: int) -> int:
    return x + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--generator", action="store_true", help="map over a generator (length unknown)")
    arguments = parser.parse_args()
    process = psutil.Process()
    peak = [0]
    sampling = threading.Event()
    sampling.set()

    def sample() -> None:
        while sampling.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.05)

    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster, Client(address=cluster.get_address()) as client:
        client.map(inc, range(1000))  # warm
        items = (i for i in range(arguments.items)) if arguments.generator else list(range(arguments.items))
        before = process.memory_info().rss
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        began = time.monotonic()
        results = client.map(inc, items)
        elapsed = time.monotonic() - began
        sampling.clear()
        sampler.join(1)
        assert results[-1] == arguments.items
    lists = 1 if arguments.generator else 2
    lists_mb = lists * arguments.items * 36 / 2**20  # lists of small ints (8-byte slot + 28-byte int)
    source = "a generator" if arguments.generator else "a list"
    held = "result list" if arguments.generator else "input and result lists"
    print(f"{arguments.items:,} items from {source} on {arguments.workers} workers: {elapsed:.2f} s, "
          f"{arguments.items / elapsed:,.0f} items/s")  # fmt: skip
    print(f"client RSS growth during the map: {(peak[0] - before) / 2**20:.0f} MB "
          f"(the {held} alone: about {lists_mb:.0f} MB)")  # fmt: skip


if __name__ == "__main__":
    main()
