"""Sharing one cluster (docs/guide/sharing.md): the split between two clients by their shares, the time to first start
of a high-priority task under load, and what the sharing machinery costs W1.

    python benchmarks/sharing.py split [--tasks 10000] [--workers 1] [--shares 3 1]
    python benchmarks/sharing.py first-start [--queued 2000] [--seconds 0.05] [--workers 2] [--repeat 5]
    python benchmarks/sharing.py w1 [--tasks 10000] [--repeat 3] [--baseline-python /work/main/.venv/bin/python]

split: each client submits its tasks one by one, the second right after the first; of the results that came while
both had work (from the second client's first result until either finished), the fraction of each client's,
for both orders of submission. Task starts, counted, not timed.

first-start: a local cluster of WORKERS one-processor workers runs QUEUED tasks of SECONDS each; once it is busy a
task of priority 10 is submitted, and the time from its submission to its start (read inside it: CLOCK_MONOTONIC is
one clock for every process of the machine) is printed, with the run time of a low task for scale.

w1: 10,000 tiny tasks submitted one by one, then gathered, on 2 workers, in tasks per second; with
--baseline-python (another checkout's interpreter, e.g. main's, whose queue has unweighted turns and no
overtaking), the two are alternated and the ratio printed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time

from scaler import Client, SchedulerClusterCombo


def tiny(tag: str) -> str:
    return tag


def slow(seconds: float) -> float:
    started = time.monotonic()
    time.sleep(seconds)
    return started


def inc(value: int) -> int:
    return value + 1


def split(arguments: argparse.Namespace) -> None:
    heavy_share, light_share = arguments.shares
    expected = heavy_share / (heavy_share + light_share)
    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster:
        for heavy_first in (True, False):
            fraction = one_split(cluster.get_address(), arguments.tasks, heavy_share, light_share, heavy_first)
            order = "heavy first" if heavy_first else "light first"
            print(f"split ({order}): share {heavy_share:g} got {fraction:.1%} of the starts while both had work "
                  f"(expected {expected:.1%})")  # fmt: skip


def one_split(address: str, tasks: int, heavy_share: float, light_share: float, heavy_first: bool) -> float:
    heavy, light = Client(address, share=heavy_share), Client(address, share=light_share)
    order: list[str] = []
    lock = threading.Lock()

    def note(tag: str) -> None:
        with lock:
            order.append(tag)

    try:
        futures = []
        sequence = [(heavy, "heavy"), (light, "light")] if heavy_first else [(light, "light"), (heavy, "heavy")]
        for client, tag in sequence:
            for _ in range(tasks):
                future = client.submit(tiny, tag)
                future.add_done_callback(lambda _f, tag=tag: note(tag))
                futures.append(future)
        for future in futures:
            future.result()
    finally:
        heavy.disconnect()
        light.disconnect()
    second = sequence[1][1]
    start = order.index(second)
    done = {"heavy": order[:start].count("heavy"), "light": order[:start].count("light")}
    counts = {"heavy": 0, "light": 0}
    for tag in order[start:]:
        counts[tag] += 1
        done[tag] += 1
        if done[tag] == tasks:
            break
    return counts["heavy"] / (counts["heavy"] + counts["light"])


def first_start(arguments: argparse.Namespace) -> None:
    waits = []
    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster, Client(cluster.get_address()) as client:
        for _ in range(arguments.repeat):
            low = [client.submit(slow, arguments.seconds) for _ in range(arguments.queued)]
            low[arguments.workers * 2].result()  # busy, with prefetched work held
            submitted = time.monotonic()
            started = client.submit(slow, 0.0, priority=10).result()
            waits.append(started - submitted)
            for future in low:
                future.cancel()
    print(f"first start of a priority-10 task behind {arguments.queued} queued tasks of {arguments.seconds * 1000:g} "
          f"ms on {arguments.workers} workers: median {statistics.median(waits) * 1000:.1f} ms, "
          f"worst {max(waits) * 1000:.1f} ms of {len(waits)}")  # fmt: skip


def w1_once(tasks: int) -> float:
    with SchedulerClusterCombo(n_workers=2) as cluster, Client(cluster.get_address()) as client:
        [f.result() for f in [client.submit(inc, x) for x in range(1000)]]  # warm-up
        began = time.perf_counter()
        futures = [client.submit(inc, x) for x in range(tasks)]
        assert [future.result() for future in futures][-1] == tasks
        return tasks / (time.perf_counter() - began)


def w1(arguments: argparse.Namespace) -> None:
    ours: list[float] = []
    baseline: list[float] = []
    for _ in range(arguments.repeat):
        ours.append(w1_once(arguments.tasks))
        if arguments.baseline_python:
            command = [arguments.baseline_python, __file__, "w1-once", "--tasks", str(arguments.tasks)]
            baseline.append(float(subprocess.run(command, capture_output=True, text=True, check=True).stdout))
    line = f"W1: {statistics.median(ours):,.0f} tasks/s with sharing (median of {len(ours)})"
    if baseline:
        ratio = statistics.median(ours) / statistics.median(baseline)
        line += f", {statistics.median(baseline):,.0f} with the baseline: ratio {ratio:.3f}"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    split_parser = commands.add_parser("split")
    split_parser.add_argument("--tasks", type=int, default=10_000)
    split_parser.add_argument("--workers", type=int, default=1)
    split_parser.add_argument("--shares", type=float, nargs=2, default=(3.0, 1.0))
    first = commands.add_parser("first-start")
    first.add_argument("--queued", type=int, default=2000)
    first.add_argument("--seconds", type=float, default=0.05)
    first.add_argument("--workers", type=int, default=2)
    first.add_argument("--repeat", type=int, default=5)
    w1_parser = commands.add_parser("w1")
    w1_parser.add_argument("--tasks", type=int, default=10_000)
    w1_parser.add_argument("--repeat", type=int, default=3)
    w1_parser.add_argument("--baseline-python", default=None)
    once = commands.add_parser("w1-once")  # what --baseline-python runs
    once.add_argument("--tasks", type=int, default=10_000)
    arguments = parser.parse_args()
    if arguments.command == "split":
        split(arguments)
    elif arguments.command == "first-start":
        first_start(arguments)
    elif arguments.command == "w1":
        w1(arguments)
    else:
        print(w1_once(arguments.tasks))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
