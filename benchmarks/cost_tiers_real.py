"""The cost policy for real, at small scale: a cheap tier that boots slowly against a dear one that boots fast.

    python benchmarks/cost_tiers_real.py [--boot-seconds 20] [--policies work cost waterfall_v1]

"spot" is `aws_raw_ecs` on the fake cloud (1-worker tasks booting in BOOT seconds, 0.05 per worker-hour, at
most 8); "fast" is `baremetal_native` on this machine (workers up in about a second, 0.20 per worker-hour, at
most 8). For each policy a fresh stack runs the same three bursts (40 tasks of 2 s at t = 0, 40 of 2 s at
t = 40 s, 20 of 3 s at t = 80 s) and the script prints the spend (each manager's units, booting ones included,
times its price, integrated over the run from the monitor feed), the p50/p95 task latency (submit to result)
and the time to the last result. `cost` runs with target_finish_seconds=30, `cost_default_t` without one (T is then
twice the slowest manager's boot, at least 60 s: 60 s here). Not a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from scaler import Client
from scaler.io.address import free_tcp_port_block
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from scaler_rehearsal.fake_cloud.cloud import FakeCloud

BIN = Path(sys.executable).parent
PRICES = {"spot": 0.05, "fast": 0.20}
BURSTS = ((0.0, 40, 2.0), (40.0, 40, 2.0), (80.0, 20, 3.0))  #: (start, tasks, seconds each)
POLICIES = {
    "work": ("simple", "allocate=even_load; scaling=work; cooldown_seconds=10"),
    "cost": ("simple", "allocate=even_load; scaling=cost; cooldown_seconds=10; target_finish_seconds=30"),
    #: no target_finish_seconds: T is twice the slowest manager's boot, at least 60 s (here 60 s)
    "cost_default_t": ("simple", "allocate=even_load; scaling=cost; cooldown_seconds=10"),
    "waterfall_v1": ("waterfall_v1", "1, spot, 8\n2, fast, 8\ntasks_per_worker = 1"),
}


def work(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


class Spend(threading.Thread):
    """Integrates the managers' units times their price over time, from the monitor feed."""

    def __init__(self, monitor: str) -> None:
        super().__init__(daemon=True)
        self._reader = FeedReader(monitor, topics=(STATUS_TOPIC,))
        self.total = 0.0  #: in price-hours
        self.units: dict[str, int] = {}
        self.running = threading.Event()
        self.running.set()

    def run(self) -> None:
        last = time.monotonic()
        while self.running.is_set():
            message = self._reader.receive(0.1)
            now = time.monotonic()
            self.total += sum(PRICES.get(name, 0.0) * units for name, units in self.units.items()) * (now - last) / 3600
            last = now
            if isinstance(message, m.StatusSnapshot):
                self.units = {manager.manager_id: manager.units for manager in message.managers}
        self._reader.close()


def one_policy(name: str, endpoint: str, boot_seconds: float) -> tuple[float, float, float, float]:
    base = free_tcp_port_block(3)
    scheduler, storage, monitor = (f"tcp://127.0.0.1:{base + offset}" for offset in range(3))
    quiet = ["-ll", "WARNING"]
    engine, content = POLICIES[name]
    cloud_env = dict(
        os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing"
    )
    manager = str(BIN / "scaler_worker_manager")
    spot = [manager, "aws_raw_ecs", scheduler, "-wmi", "spot", "-mtc", "8", "-his", "1", "--ecs-subnets", "default"]
    spot += ["--ecs-task-cpu", "1", "--ecs-task-memory", "2", "--worker-cost-per-hour", "0.05"]
    spot += ["--expected-boot-seconds", f"{boot_seconds:g}", *quiet]
    fast = [manager, "baremetal_native", scheduler, "-wmi", "fast", "-mtc", "8", "-his", "1"]
    fast += ["--worker-cost-per-hour", "0.20", *quiet]
    scheduler_command = [str(BIN / "scaler_scheduler"), scheduler, "-osa", storage, "-et", engine]
    scheduler_command += ["--policy-content", content, *quiet]
    started = [
        subprocess.Popen([str(BIN / "scaler_object_storage_server"), storage, *quiet]),
        subprocess.Popen(scheduler_command),
        subprocess.Popen(spot, env=cloud_env),
        subprocess.Popen(fast),
    ]
    spend = Spend(monitor)
    spend.start()
    latencies: list[float] = []
    try:
        with Client(address=scheduler, timeout_seconds=600) as client:
            began = time.monotonic()
            futures: list[tuple[float, Future[float]]] = []
            for start, count, seconds in BURSTS:
                time.sleep(max(0.0, began + start - time.monotonic()))
                submitted = time.monotonic()
                for _ in range(count):
                    future = client.submit(work, seconds)
                    future.add_done_callback(lambda _f, at=submitted: latencies.append(time.monotonic() - at))
                    futures.append((submitted, future))
            for _submitted, future in futures:
                future.result()
            elapsed = time.monotonic() - began
        time.sleep(20)  # the scale-down after the last result is paid for too
        ordered = sorted(latencies)
        return spend.total, ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.95) - 1], elapsed
    finally:
        spend.running.clear()
        spend.join(5)
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boot-seconds", type=float, default=20.0)
    parser.add_argument("--policies", nargs="+", choices=sorted(POLICIES), default=list(POLICIES))
    arguments = parser.parse_args()
    print(f"spot: fake-cloud ECS, boot {arguments.boot_seconds:g} s, 0.05/h, max 8; fast: local, 0.20/h, max 8")
    print(f"{'policy':<14} {'spend':>8} {'p50 s':>6} {'p95 s':>6} {'last result s':>14}")
    with FakeCloud(boot_seconds=arguments.boot_seconds, log_directory=Path(tempfile.mkdtemp())) as cloud:
        for name in arguments.policies:
            total, p50, p95, elapsed = one_policy(name, cloud.endpoint_url, arguments.boot_seconds)
            print(f"{name:<14} {total:8.4f} {p50:6.1f} {p95:6.1f} {elapsed:14.1f}", flush=True)
            cloud.reset()


if __name__ == "__main__":
    main()
