"""Elastic scaling of our platform from zero workers, measured from the scheduler's own status feed.

    python benchmarks/scaling_ours.py
    python benchmarks/scaling_ours.py --policy-content "allocate=even_load; scaling=vanilla"

Starts our object storage, a scheduler with the given policy, and a dynamic `baremetal_native` manager
(`-mtc 8`) with no worker. First measures one worker start-up (a `scaler_worker` process launched by
hand, until the scheduler lists it), then submits 100 x time.sleep(0.1) and prints one JSON object:
time to the first result, total time, the ideal (100 x 0.1 s / 8 workers = 1.25 s) plus one worker
start-up, the peak number of the manager's workers, and the time from the last result until the
manager's workers are back to zero. Everything started is stopped at the end.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from scaler import Client
from scaler.io.address import free_tcp_port_block
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC

MANAGER_ID = "bench"


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


class StatusFeed:
    """The scheduler's status snapshots, read on a thread; `wait_for(predicate)` blocks until one matches."""

    def __init__(self, address: str) -> None:
        self._reader = FeedReader(address, topics=(STATUS_TOPIC,))
        self.peak_workers = 0
        self._latest: m.StatusSnapshot | None = None
        self._changed = threading.Condition()
        self._running = True
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while self._running:
            snapshot = self._reader.receive(0.1)
            if isinstance(snapshot, m.StatusSnapshot):
                with self._changed:
                    self._latest = snapshot
                    self.peak_workers = max(self.peak_workers, _manager_workers(snapshot))
                    self._changed.notify_all()

    def wait_for(self, predicate: Any, timeout_seconds: float, what: str) -> float:
        """Seconds until a snapshot matches (measured here, when the snapshot arrives)."""
        start = time.perf_counter()
        with self._changed:
            if not self._changed.wait_for(
                lambda: self._latest is not None and predicate(self._latest), timeout_seconds
            ):
                raise TimeoutError(f"no status snapshot with {what} within {timeout_seconds:g} s")
        return time.perf_counter() - start

    def close(self) -> None:
        self._running = False
        self._thread.join()
        self._reader.close()


def _manager_workers(snapshot: m.StatusSnapshot) -> int:
    return sum(1 for worker in snapshot.workers if worker.manager_id == MANAGER_ID)


def start(log_dir: Path, name: str, module: str, *args: str) -> subprocess.Popen[bytes]:
    with open(log_dir / f"{name}.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-m", module, *args], stdout=log, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    base = free_tcp_port_block(3)
    scheduler, storage, monitor = (f"tcp://127.0.0.1:{base + offset}" for offset in range(3))
    processes = [start(log_dir, "object_storage", "scaler.entry_points.object_storage_server", storage)]
    scheduler_args = [scheduler, "-osa", storage, "--policy-engine-type", args.policy_engine_type]
    processes.append(start(log_dir, "scheduler", "scaler.entry_points.scheduler", *scheduler_args,
                           "--policy-content", args.policy_content))  # fmt: skip
    feed = StatusFeed(monitor)
    try:
        feed.wait_for(lambda snapshot: True, 30, "a published snapshot")
        probe = start(log_dir, "probe_worker", "scaler.entry_points.worker", scheduler, "-wmi", "probe")
        start_up = feed.wait_for(lambda s: any(w.manager_id == "probe" for w in s.workers), 60, "the probe worker")
        stop(probe)
        feed.wait_for(lambda snapshot: not snapshot.workers, 30, "no worker")

        manager_args = ["baremetal_native", scheduler, "-wmi", MANAGER_ID, "-mtc", str(args.max_workers)]
        processes.append(start(log_dir, "worker_manager", "scaler.entry_points.worker_manager", *manager_args))
        feed.wait_for(lambda s: any(x.manager_id == MANAGER_ID for x in s.managers), 30, "the manager")

        with Client(scheduler) as client:
            begin = time.perf_counter()
            futures = [client.submit(sleep_for, args.task_seconds) for _ in range(args.tasks)]
            concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
            first = time.perf_counter() - begin
            results = [future.result() for future in futures]
            total = time.perf_counter() - begin
        assert results == [args.task_seconds] * args.tasks, "wrong results"
        back_to_zero = feed.wait_for(lambda snapshot: _manager_workers(snapshot) == 0, args.timeout, "zero workers")
        ideal = args.tasks * args.task_seconds / args.max_workers
        return {
            "policy_engine_type": args.policy_engine_type,
            "policy_content": args.policy_content,
            "tasks": args.tasks,
            "task_seconds": args.task_seconds,
            "max_workers": args.max_workers,
            "worker_start_up_seconds": round(start_up, 3),
            "ideal_seconds": ideal,
            "ideal_plus_start_up_seconds": round(ideal + start_up, 3),
            "first_result_seconds": round(first, 3),
            "total_seconds": round(total, 3),
            "total_over_ideal_plus_start_up": round(total / (ideal + start_up), 2),
            "peak_workers": feed.peak_workers,
            "back_to_zero_seconds": round(back_to_zero, 3),
        }
    finally:
        feed.close()
        for process in reversed(processes):
            stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy-engine-type", default="simple")
    parser.add_argument("--policy-content", default="allocate=even_load; scaling=work; cooldown_seconds=5")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--task-seconds", type=float, default=0.1)
    parser.add_argument("--max-workers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=120, help="longest wait for the scale-down")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scaling-ours-") as log_dir:
        print(json.dumps(measure(args, Path(log_dir)), indent=2))


if __name__ == "__main__":
    main()
