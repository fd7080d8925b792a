"""A burst from zero workers on the fake cloud against the same burst with local processes.

    python benchmarks/cloud_burst.py [--tasks 100] [--task-seconds 1] [--workers 8] [--boot-seconds 5]
                                     [--backends aws_raw_ecs,orb_aws_ec2,baremetal_native]

The cold burst of issue #29: `--tasks 2000 --task-seconds 1 --boot-seconds 30 --workers 32`.

For each backend (aws_raw_ecs and orb_aws_ec2 on the fake cloud with the given boot delay, baremetal_native
on this machine), a scheduler with the work policy and a manager with `-mtc WORKERS` start with no worker; a
client maps TASKS tasks of TASK_SECONDS each. Prints the time from the map to its last result against the
ideal (ceil(TASKS / WORKERS) * TASK_SECONDS, plus one boot for the cloud), the time to the first result against
its ideal (one boot plus one task), and the worker-seconds the units
were up from the map until the last worker left (sampled from the monitor feed), against the TASKS *
TASK_SECONDS of work. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from scaler import Client
from scaler.io.address import free_tcp_port_block
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from scaler_rehearsal.fake_cloud.cloud import FakeCloud

BIN = Path(sys.executable).parent
COOLDOWN_SECONDS = 2


def work(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


class WorkerSeconds(threading.Thread):
    """Integrates the manager's connected workers over time, from the monitor feed."""

    def __init__(self, monitor: str, manager_id: str) -> None:
        super().__init__(daemon=True)
        self._reader = FeedReader(monitor, topics=(STATUS_TOPIC,))
        self._manager_id = manager_id
        self.total = 0.0
        self.workers = 0
        self.peak = 0
        self.running = threading.Event()
        self.running.set()

    def run(self) -> None:
        last = time.monotonic()
        while self.running.is_set():
            message = self._reader.receive(0.1)
            now = time.monotonic()
            self.total += self.workers * (now - last)
            last = now
            if isinstance(message, m.StatusSnapshot):
                self.workers = sum(1 for worker in message.workers if worker.manager_id == self._manager_id)
                self.peak = max(self.peak, self.workers)
        self._reader.close()


def one_burst(backend: str, arguments: argparse.Namespace, endpoint: str | None) -> tuple[float, float, float, int]:
    base = free_tcp_port_block(3)
    scheduler, storage, monitor = (f"tcp://127.0.0.1:{base + offset}" for offset in range(3))
    quiet = ["-ll", "WARNING"]
    policy = f"allocate=even_load; scaling=work; cooldown_seconds={COOLDOWN_SECONDS}"
    manager_flags = {
        "aws_raw_ecs": ["--ecs-subnets", "default", "--ecs-task-cpu", "2", "--ecs-task-memory", "4"],
        "orb_aws_ec2": ["--aws-region", "us-east-1", "--instance-type", "t3.medium"],
        "baremetal_native": [],
    }[backend]
    environment = dict(os.environ)
    if endpoint is not None:
        environment.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    started = [
        subprocess.Popen([BIN / "scaler_object_storage_server", storage, *quiet]),
        subprocess.Popen([BIN / "scaler_scheduler", scheduler, "-osa", storage, "--policy-content", policy, *quiet]),
    ]
    manager_id = f"bench-{backend}"
    started.append(
        subprocess.Popen(
            [
                BIN / "scaler_worker_manager",
                backend,
                scheduler,
                "-wmi",
                manager_id,
                "-mtc",
                str(arguments.workers),
                "-his",
                "1",
                *manager_flags,
                *quiet,
            ],
            env=environment,
        )
    )
    sampler = WorkerSeconds(monitor, manager_id)
    sampler.start()
    try:
        with Client(address=scheduler, timeout_seconds=300) as client:
            began = time.monotonic()
            futures = [client.submit(work, arguments.task_seconds) for _ in range(arguments.tasks)]
            next(concurrent.futures.as_completed(futures))
            first = time.monotonic() - began
            assert sum(future.result() for future in futures) == arguments.tasks * arguments.task_seconds
            elapsed = time.monotonic() - began
            deadline = time.monotonic() + 120
            while sampler.workers and time.monotonic() < deadline:
                time.sleep(0.2)
        return first, elapsed, sampler.total, sampler.peak
    finally:
        sampler.running.clear()
        sampler.join(5)
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--task-seconds", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--boot-seconds", type=float, default=5.0)
    parser.add_argument("--backends", default="aws_raw_ecs,orb_aws_ec2,baremetal_native")
    arguments = parser.parse_args()
    rounds = math.ceil(arguments.tasks / arguments.workers) * arguments.task_seconds
    useful = arguments.tasks * arguments.task_seconds
    print(f"{arguments.tasks} tasks of {arguments.task_seconds:g} s, at most {arguments.workers} workers, from zero")
    print(f"{'backend':<18} {'first s':>7} {'ideal s':>7} {'time s':>7} {'ideal s':>8} {'ratio':>6} {'worker-s':>9} "
          f"{'work-s':>7} {'peak':>5}")  # fmt: skip
    with FakeCloud(boot_seconds=arguments.boot_seconds, log_directory=Path(tempfile.mkdtemp())) as cloud:
        for backend in arguments.backends.split(","):
            cloud_backend = backend != "baremetal_native"
            boot = arguments.boot_seconds if cloud_backend else 0.0
            ideal, first_ideal = rounds + boot, boot + arguments.task_seconds
            endpoint = cloud.endpoint_url if cloud_backend else None
            first, elapsed, worker_seconds, peak = one_burst(backend, arguments, endpoint)
            print(
                f"{backend:<18} {first:7.1f} {first_ideal:7.1f} {elapsed:7.1f} {ideal:8.1f} {elapsed / ideal:6.2f} "
                f"{worker_seconds:9.0f} "
                f"{useful:7.0f} {peak:5d}",
                flush=True,
            )
            cloud.reset()


if __name__ == "__main__":
    main()
