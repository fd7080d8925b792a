"""U2's timeline: where the wall time of the dataframe fan-out graph goes, on a fresh local cluster of 2 workers.

The graph is U2's (benchmarks/workloads/days.py: 250 tasks make a 20,000-row partition, 250 group them, one sums the
partial aggregates), its tasks wrapped to note when (wall clock) and in which process each ran. Printed: the client's
encoding and send, when the first task started, how busy each processor was between the first start and the last
end (and the gaps between its tasks), when the combining task started and ended, when the result reached the client
and when it was deserialized, and the CPU each kind of process burnt. Fresh cluster per round (as run.py measures
U2: processors that have not imported pandas yet); `--warm` measures a second graph on the same cluster too.

    .venv/bin/python benchmarks/u2_timeline.py --rounds 2 [--warm]
    benchmarks/.venvs/ours-before/bin/python benchmarks/u2_timeline.py      # another tree (SCALER_BENCH_BEFORE)
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent / "workloads"))

import timeline_tasks


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=250)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--warm", action="store_true", help="also a second graph on the same cluster")
    parser.add_argument(
        "--fuse", choices=("on", "off", "both"), default="on",
        help="linear chains fused (scaler/client/graph_chains.py), or not; both: alternated, a fresh cluster each",
    )  # fmt: skip
    return parser.parse_args()


def cpu_by_kind(me: psutil.Process) -> dict[str, float]:
    found: dict[str, float] = {}
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
            name = "client" if process.pid == me.pid else process.name()
        except psutil.NoSuchProcess:
            continue
        found[name] = found.get(name, 0.0) + times.user + times.system
    return found


def graph_of(partitions: int, rows: int) -> dict[str, Any]:
    graph: dict[str, Any] = {}
    for index in range(partitions):
        graph[f"made-{index}"] = (timeline_tasks.make_partition, index, rows)
        graph[f"grouped-{index}"] = (timeline_tasks.group_partition, f"made-{index}")
    graph["total"] = (timeline_tasks.combine_groups, *(f"grouped-{index}" for index in range(partitions)))
    return graph


def one_graph(client: Any, graph: dict[str, Any], me: psutil.Process, label: str) -> None:
    before = cpu_by_kind(me)
    start = time.time()
    futures = client.get(graph, keys=["total"], block=False)
    sent = time.time()
    future = futures["total"]
    future.exception()  # waits for the result without deserializing it
    arrived = time.time()
    (total, _cpu), spans = future.result()
    done = time.time()
    after = cpu_by_kind(me)
    assert len(total) == 100, total
    first = min(span[1] for span in spans)
    last_end = max(span[2] for span in spans if span[0] != "combine")
    by_pid: dict[int, list[tuple[str, float, float]]] = {}
    for kind, began, ended, pid in spans:
        by_pid.setdefault(pid, []).append((kind, began, ended))
    combine = next(span for span in spans if span[0] == "combine")
    by_pair: dict[str, list[float]] = {}
    for runs in by_pid.values():
        runs.sort(key=lambda run: run[1])
        for previous, following in itertools.pairwise(runs):
            by_pair.setdefault(f"{previous[0]}->{following[0]}", []).append(following[1] - previous[2])
    print(f"--- {label}: wall {done - start:.3f} s, load average {os.getloadavg()[0]:.1f}")
    print(f"  client: encode+send {sent - start:.3f}, first task started at {first - start:.3f}")
    for pid, runs in sorted(by_pid.items()):
        runs.sort(key=lambda run: run[1])
        busy = sum(ended - began for _, began, ended in runs)
        gaps = [runs[i + 1][1] - runs[i][2] for i in range(len(runs) - 1)]
        print(
            f"  processor {pid}: {len(runs)} tasks, busy {busy:.3f} s from {runs[0][1] - start:.3f} to "
            f"{runs[-1][2] - start:.3f}; gaps sum {sum(gaps):.3f}, max {max(gaps, default=0):.4f}, "
            f"median {sorted(gaps)[len(gaps) // 2] if gaps else 0:.4f}; first task {runs[0][2] - runs[0][1]:.3f} s"
        )
    print(
        f"  last group ended {last_end - start:.3f}; combine ran {combine[1] - start:.3f}-{combine[2] - start:.3f}; "
        f"result at client {arrived - start:.3f}; deserialized {done - start:.3f}"
    )
    for pair, gaps in sorted(by_pair.items()):
        gaps.sort()
        print(f"  gaps {pair}: {len(gaps)}, sum {sum(gaps):.3f}, median {gaps[len(gaps) // 2] * 1000:.2f} ms")
    cpu = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    print("  CPU s: " + ", ".join(f"{name} {value:.2f}" for name, value in sorted(cpu.items()) if value > 0.005))


def set_fusing(on: bool) -> None:
    try:
        from scaler.client import graph_chains
    except ImportError:  # a tree from before chains were fused
        if on:
            raise
        return
    graph_chains.FUSE_CHAINS = on


def main() -> None:
    from scaler import Client, SchedulerClusterCombo

    args = parse_args()
    timeline_tasks.importable_by_workers()
    me = psutil.Process()
    print(sys.prefix)
    graph = graph_of(args.partitions, args.rows)
    settings = {"on": [True], "off": [False], "both": [True, False]}[args.fuse]
    for number, fuse in [(number, fuse) for number in range(1, args.rounds + 1) for fuse in settings]:
        set_fusing(fuse)
        cluster = SchedulerClusterCombo(n_workers=2, logging_level="WARNING")
        client = Client(address=cluster.get_address())
        try:
            client.submit(timeline_tasks.noop).result()
            seen: set[int] = set()
            while len(seen) < 2:  # as run.py's warm-up: both processors have run a task
                seen.update(f.result() for f in [client.submit(timeline_tasks.pid_after, 0.05) for _ in range(4)])
            one_graph(client, graph, me, f"round {number}, fused {fuse}, fresh processors")
            if args.warm:
                one_graph(client, graph, me, f"round {number}, fused {fuse}, warm processors")
        finally:
            client.disconnect()
            cluster.shutdown()


if __name__ == "__main__":
    main()
