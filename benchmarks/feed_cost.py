"""The monitor feed's cost to the scheduler: its CPU time for a W1-like run (10,000 tiny tasks submitted one by
one, then gathered) with the feed published every `--interval` seconds (the scheduler's default, 1 s) to a
subscriber that reads everything, against the same run with the feed published once an hour (no snapshot,
no transition, no subscriber).

    python benchmarks/feed_cost.py [--tasks 10000] [--repeat 5] [--interval 1]
    python benchmarks/feed_cost.py --bound [--workers 100]

Prints the scheduler's CPU seconds per run (user + system, from psutil) and the median overhead. The
difference sits within the run-to-run noise of a busy machine, so `--bound` also measures the feed's work
directly, in process: the CPU time of one publication (building the read model, encoding the status, a
full batch of task transitions and the kept scaling decisions) for a cluster much larger than W1's, which
bounds the feed's share of a scheduler that publishes once per interval.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from scaler import Client
from scaler.io.address import free_tcp_port_block
from scaler.monitor.feed import FeedReader
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.events import Received
from scaler.scheduler.core.monitor_feed import DECISIONS_KEPT
from scaler.scheduler.core.task_table import TRANSITIONS_PER_PUBLICATION
from scaler.testing.simulation import SimulatedCluster

BIN = Path(sys.executable).parent


def inc(value: int) -> int:
    return value + 1


def one_run(tasks: int, status_interval: float, subscribe: bool) -> float:
    base = free_tcp_port_block(3)
    scheduler, storage, monitor = (f"tcp://127.0.0.1:{base + offset}" for offset in range(3))
    quiet = ["-ll", "WARNING"]
    started = [
        subprocess.Popen([BIN / "scaler_object_storage_server", storage, *quiet]),
        subprocess.Popen(
            [BIN / "scaler_scheduler", scheduler, "-osa", storage, "-p", "False", "-sri", str(status_interval), *quiet]
        ),
        subprocess.Popen([BIN / "scaler_cluster", "-n", "2", scheduler, *quiet]),
    ]
    stop = threading.Event()
    reader_thread = None
    try:
        process = psutil.Process(started[1].pid)
        with Client(address=scheduler) as client:
            while client.session.worker_count < 2:
                time.sleep(0.05)
            if subscribe:
                reader_thread = threading.Thread(target=_read_everything, args=(monitor, stop), daemon=True)
                reader_thread.start()
                time.sleep(0.5)
            before = process.cpu_times()
            futures = [client.submit(inc, n) for n in range(tasks)]
            assert [future.result() for future in futures] == [n + 1 for n in range(tasks)]
            after = process.cpu_times()
        return (after.user - before.user) + (after.system - before.system)
    finally:
        stop.set()
        if reader_thread is not None:
            reader_thread.join()
        for child in reversed(started):
            child.terminate()
        for child in started:
            child.wait(20)


def _read_everything(address: str, stop: threading.Event) -> None:
    with FeedReader(address) as reader:
        while not stop.is_set():
            reader.receive(0.1)


def publication_seconds(workers: int, rounds: int = 50) -> float:
    """Median CPU seconds of one publication's work for a cluster of `workers` workers with 4 processors
    each, 10 clients, 200 functions, 2 tasks held per worker and a full batch of transitions (task ends after a
    result: each names its worker, its run time and a peak memory, as the run report reads them)."""
    sim = SimulatedCluster()
    processors = tuple(m.ProcessorStatus(1000 + n, 50.0, 100_000_000, "running") for n in range(4))
    for number in range(workers):
        worker = sim.add_worker(f"w{number}", capacity=2)
        status = m.WorkerStatus(queued=0, running=2, processors=processors)
        sim.send(worker.peer, m.Heartbeat(20.0, 200_000_000, status))
    clients = [sim.add_client(f"c{number}") for number in range(10)]
    for number in range(2 * workers + 1000):
        client = clients[number % len(clients)]
        task_id = TaskID(number.to_bytes(16, "big"))
        sim.submit(client, [m.Task(task_id, ClientID(client.peer), b"", f"function_{number % 200}")])
    transitions = tuple(
        m.TaskTransition(TaskID(n.to_bytes(16, "big")), "success", b"Worker|w", "function_1", 1e9, 0.012, 1 << 20)
        for n in range(TRANSITIONS_PER_PUBLICATION)
    )
    decisions = tuple(m.ScalingDecision("m", 3, 8, "412 tasks queued, work policy", 1e9) for _ in range(DECISIONS_KEPT))
    timings = []
    for _ in range(rounds):
        sim.core.handle(Received(PeerID(clients[0].peer), m.Heartbeat(), sim.now))  # a new step: a new view
        started = time.process_time()
        codec.encode(sim.core.view())
        codec.encode(m.TaskTransitions(transitions, 0, 1e9))
        codec.encode(m.ScalingDecisions(decisions, 1e9))
        timings.append(time.process_time() - started)
    return statistics.median(timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0, help="the feed's publication period in seconds")
    parser.add_argument("--bound", action="store_true", help="measure one publication's work in process")
    parser.add_argument("--workers", type=int, default=100, help="with --bound: the cluster's size")
    args = parser.parse_args()
    if args.bound:
        for workers in (2, args.workers):
            seconds = publication_seconds(workers)
            print(f"{workers} workers: one publication costs {1000 * seconds:.2f} ms of CPU; at one per "
                  f"{args.interval:g} s that is {100 * seconds / args.interval:.2f}% of one core")  # fmt: skip
        return 0
    with_feed, without_feed = [], []
    for round_number in range(args.repeat):
        without_feed.append(one_run(args.tasks, 3600.0, subscribe=False))
        with_feed.append(one_run(args.tasks, args.interval, subscribe=True))
        print(f"round {round_number + 1}: scheduler CPU {without_feed[-1]:.3f} s without the feed, "
              f"{with_feed[-1]:.3f} s with it (every {args.interval:g} s, read by a subscriber)")  # fmt: skip
    off, on = statistics.median(without_feed), statistics.median(with_feed)
    paired = statistics.median(100 * (b - a) / a for a, b in zip(without_feed, with_feed, strict=True))
    print(f"median: {off:.3f} s -> {on:.3f} s ({100 * (on - off) / off:+.1f}%); median of the paired rounds: "
          f"the feed costs {paired:+.1f}% of the scheduler's CPU")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
