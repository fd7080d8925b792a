"""Does a worker's memory grow with the tasks it runs? Clients come and go, each running a map of tiny tasks (and,
with `--objects`, tasks whose argument is a 1 MB object), against a `SchedulerClusterCombo`; every `--every` rounds
the USS and PSS of each worker's agent, zygote and processors are printed, so growth shows per process kind and
per round instead of summed with the shared pages counted in each process.

    .venv/bin/python benchmarks/worker_memory.py --rounds 600 --every 100
    .venv/bin/python benchmarks/worker_memory.py --rounds 300 --every 50 --objects

With `SCALER_TRACEMALLOC_DIRECTORY=DIR` set, each agent and processor also writes a tracemalloc snapshot there every
`SCALER_TRACEMALLOC_SECONDS` (default 30); `--diff DIR` prints the top growth between each process's first and last.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import time
import tracemalloc
from pathlib import Path

import psutil

from scaler import Client, SchedulerClusterCombo
from scaler.config.byte_size import format_byte_size
from scaler.io.address import free_tcp_port_block


def square(x: int) -> int:
    return x * x


def length(data: bytes) -> int:
    return len(data)


#: process names (`scaler.io.child_processes.name_this_process`, at most 15 bytes) by kind
KINDS = {"scaler-worker": "agent", "scaler-zygote": "zygote", "scaler-processo": "processor"}


def process_kinds(root: psutil.Process) -> dict[str, list[psutil.Process]]:
    """The workers' processes below `root` by kind, from the names they give themselves."""
    kinds: dict[str, list[psutil.Process]] = collections.defaultdict(list)
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            kind = KINDS.get(child.name())
            if kind:
                kinds[kind].append(child)
    return kinds


def sample(root: psutil.Process) -> dict[str, list[tuple[int, int]]]:
    """(USS, PSS) of every worker process, by kind."""
    found: dict[str, list[tuple[int, int]]] = {}
    for kind, processes in process_kinds(root).items():
        for process in processes:
            with contextlib.suppress(psutil.Error):
                info = process.memory_full_info()
                found.setdefault(kind, []).append((info.uss, info.pss))
    return found


def show(values: list[tuple[int, int]]) -> str:
    return " ".join(f"{format_byte_size(uss)}/{format_byte_size(pss)}" for uss, pss in values)


def run(rounds: int, every: int, objects: bool, workers: int) -> None:
    address = f"tcp://127.0.0.1:{free_tcp_port_block(1)}"
    combo = SchedulerClusterCombo(address=address, n_workers=workers)
    root = psutil.Process()
    tasks = 0
    started = time.monotonic()
    try:
        print("round  tasks  seconds | USS/PSS per process: agents | zygotes | processors", flush=True)
        for number in range(rounds + 1):
            if number % every == 0:
                kinds = sample(root)
                print(
                    f"{number:5d} {tasks:7d} {time.monotonic() - started:6.0f} | {show(kinds.get('agent', []))} | "
                    f"{show(kinds.get('zygote', []))} | {show(kinds.get('processor', []))}",
                    flush=True,
                )
            if number == rounds:
                break
            with Client(address) as client:
                values = list(range(200))
                assert client.map(square, values) == [x * x for x in values]
                tasks += len(values)
                if objects:
                    reference = client.send_object(os.urandom(1_000_000))
                    futures = [client.submit(length, reference) for _ in range(5)]
                    assert [f.result() for f in futures] == [1_000_000] * 5
                    tasks += 5
    finally:
        combo.shutdown()


def diff(directory: Path, top: int) -> None:
    """For each process that wrote snapshots, the lines whose allocations grew most between its first and last."""
    by_process: dict[str, list[Path]] = collections.defaultdict(list)
    for path in sorted(directory.glob("*.tracemalloc")):
        by_process[path.name.rsplit("-", 1)[0]].append(path)
    for process, paths in sorted(by_process.items()):
        if len(paths) < 2:
            continue
        first, last = tracemalloc.Snapshot.load(str(paths[0])), tracemalloc.Snapshot.load(str(paths[-1]))
        print(f"\n{process}: {paths[0].name} -> {paths[-1].name}")
        for stat in last.compare_to(first, "lineno")[:top]:
            print(f"  {stat}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=600, help="clients, one after another")
    parser.add_argument("--every", type=int, default=100, help="rounds between samples")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--objects", action="store_true", help="each client also sends a 1 MB object to 5 tasks")
    parser.add_argument("--diff", type=Path, help="only compare the tracemalloc snapshots in this folder")
    parser.add_argument("--top", type=int, default=12)
    arguments = parser.parse_args()
    if arguments.diff:
        diff(arguments.diff, arguments.top)
        return
    run(arguments.rounds, arguments.every, arguments.objects, arguments.workers)
    print(f"load average {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
