"""A real `Client`'s memory at scale, in a process of its own (the client axis of the scale harness).

    python -m scale.client_side pending ADDRESS --tasks 1000000     # futures held while no worker runs them
    python -m scale.client_side map ADDRESS --items 10000000        # Client.map of many small items (workers needed)

`pending`: submits `tasks` calls of a no-op one by one and reads the process's RSS before and after: what a pending
future costs the client (its future, its task's frame kept for a scheduler restart, its entry in the core). `map`:
one `Client.map` of `items` small items, the RSS sampled while it runs: the tasks it keeps in flight are chunks, a
bounded number of them, so what grows is the result list the caller asked for. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time

import psutil

from scaler import Client

MB = 1 << 20


def noop(x: int) -> int:
    return x


def rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def pending(address: str, tasks: int) -> dict[str, float]:
    with Client(address=address) as client:
        client.submit(noop, 0)  # its function stored, the connection warm
        before = rss()
        started = time.monotonic()
        futures = [client.submit(noop, number) for number in range(tasks)]
        seconds = time.monotonic() - started
        after = rss()
        held = len(futures)
        del futures
        client.clear()
    return {"tasks": held, "rss_mb_before": before / MB, "rss_mb_after": after / MB,
            "bytes_per_pending_future": (after - before) / held, "submit_seconds": seconds}  # fmt: skip


def mapped(address: str, items: int) -> dict[str, float]:
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        process = psutil.Process()
        while not done.wait(0.2):
            peak[0] = max(peak[0], process.memory_info().rss)

    with Client(address=address, timeout_seconds=3600) as client:
        before = rss()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        results = client.map(abs, range(items))
        seconds = time.monotonic() - started
        done.set()
        sampler.join()
        after = rss()
        assert len(results) == items and results[-1] == items - 1
        result_list = sys.getsizeof(results) + sum(map(sys.getsizeof, results))  # what the caller asked for
    return {"items": items, "seconds": seconds, "rss_mb_before": before / MB, "rss_mb_peak": peak[0] / MB,
            "rss_mb_after": after / MB, "result_list_mb": result_list / MB,
            "bytes_per_item_beyond_results": (peak[0] - before - result_list) / items}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("pending", "map"))
    parser.add_argument("address")
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=10_000_000)
    arguments = parser.parse_args()
    if arguments.mode == "pending":
        answer = pending(arguments.address, arguments.tasks)
    else:
        answer = mapped(arguments.address, arguments.items)
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
