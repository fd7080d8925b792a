"""How the scheduler core's cost grows with workers, clients and queue length: the pure core (no sockets) fed
with fake peers, as the scheduler's shell would feed it.

    python benchmarks/core_scale.py [--tasks 50000] [--queued 200000,1000000]

1. CPU per task (submit, dispatch, result, answer) against the number of workers (10 to 1,000, 1 client) and of
   clients (1 to 100, 100 workers); workers hold 2 tasks at once and finish them in turn.
2. Memory per queued task: QUEUED tasks submitted with no worker (RSS growth / tasks), then RSS once they have
   all run (is the memory given back?).

Prints tables and writes docs/images/core_scale.svg (CPU per task against workers and clients). Not a test.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import time
from pathlib import Path

import psutil

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import Received
from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore
from scaler_rehearsal.testing.simulation import PYTHON, hello

CAPACITY = 2
SVG = Path(__file__).resolve().parent.parent / "docs" / "images" / "core_scale.svg"


class Driver:
    """The core with fake peers: workers hold what they are sent and finish it when asked."""

    def __init__(self, workers: int, clients: int) -> None:
        self.core = SchedulerCore(CoreSettings("tcp://s:1", "tcp://s:2", PYTHON))
        self.now = 0.0
        self.held: dict[PeerID, list[TaskID]] = {}
        self.answered = 0
        self.clients = [PeerID(b"Client|%d" % number) for number in range(clients)]
        for client in self.clients:
            self.send(client, hello(m.ClientInfo()))
        self.workers = [PeerID(b"Worker|SIM|%d" % number) for number in range(workers)]
        for worker in self.workers:
            self.held[worker] = []
            self.send(worker, hello(m.WorkerInfo((), CAPACITY, "", "SIM")))

    def send(self, peer: PeerID, message: m.Message) -> None:
        for effect in self.core.handle(Received(peer, message, self.now)):
            if isinstance(effect, Send):
                if isinstance(effect.message, m.Task):
                    self.held[effect.peer].append(effect.message.task_id)
                elif isinstance(effect.message, m.TaskResult):
                    self.answered += 1

    def submit(self, count: int, first: int = 0) -> None:
        for number in range(first, first + count):
            client = self.clients[number % len(self.clients)]
            self.send(client, m.Task(TaskID(number.to_bytes(16, "big")), ClientID(client), b"body", "f"))

    def run_until_answered(self, total: int) -> None:
        while self.answered < total:
            for worker in self.workers:
                held = self.held[worker]
                if held:
                    task_id = held.pop(0)
                    self.send(worker, m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v"))


def cpu_per_task(workers: int, clients: int, tasks: int) -> float:
    driver = Driver(workers, clients)
    started = time.process_time()
    driver.submit(tasks)
    driver.run_until_answered(tasks)
    return (time.process_time() - started) / tasks * 1e6


def rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def memory(queued: int) -> tuple[float, float, float]:
    """(bytes per queued task, MB before, MB after they all ran)."""
    before = rss()
    driver = Driver(0, 1)
    driver.submit(queued)
    grown = rss() - before
    driver.workers = [PeerID(b"Worker|SIM|%d" % number) for number in range(100)]
    for worker in driver.workers:
        driver.held[worker] = []
        driver.send(worker, hello(m.WorkerInfo((), CAPACITY, "", "SIM")))
    driver.run_until_answered(queued)
    trim()
    return grown / queued, before / 2**20, rss() / 2**20


def svg(workers: list[tuple[int, float]], clients: list[tuple[int, float]]) -> str:
    """Two log-x line charts side by side, CPU per task (µs) on y."""
    width, height, pad = 320, 220, 40
    top = max(value for _x, value in workers + clients) * 1.2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * width}" height="{height}" font-family="sans-serif" '
             f'font-size="11">']  # fmt: skip
    import math

    for index, (title, points) in enumerate((("workers (1 client)", workers), ("clients (100 workers)", clients))):
        left = index * width
        low, high = math.log10(points[0][0]), math.log10(points[-1][0])

        def x(value: float, left: int = left, low: float = low, high: float = high) -> float:
            return left + pad + (math.log10(value) - low) / (high - low) * (width - 2 * pad)

        def y(value: float) -> float:
            return height - pad - value / top * (height - 2 * pad)

        parts.append(f'<line x1="{left + pad}" y1="{height - pad}" x2="{left + width - pad}" y2="{height - pad}" '
                     f'stroke="black"/><line x1="{left + pad}" y1="{pad}" x2="{left + pad}" y2="{height - pad}" '
                     f'stroke="black"/>')  # fmt: skip
        parts.append(f'<text x="{left + width / 2}" y="{height - 8}" text-anchor="middle">{title}</text>')
        parts.append(f'<text x="{left + 4}" y="{pad - 12}">CPU per task, µs (max {top:.0f})</text>')
        line = " ".join(f"{x(count):.1f},{y(value):.1f}" for count, value in points)
        parts.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
        for count, value in points:
            parts.append(f'<circle cx="{x(count):.1f}" cy="{y(value):.1f}" r="3" fill="#1f77b4"/>')
            parts.append(f'<text x="{x(count):.1f}" y="{y(value) - 6:.1f}" text-anchor="middle">{value:.0f}</text>')
            parts.append(f'<text x="{x(count):.1f}" y="{height - pad + 14}" text-anchor="middle">{count}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--queued", default="200000,1000000")
    arguments = parser.parse_args()
    by_workers = [(count, cpu_per_task(count, 1, arguments.tasks)) for count in (10, 100, 1000)]
    by_clients = [(count, cpu_per_task(100, count, arguments.tasks)) for count in (1, 10, 100)]
    print(f"CPU per task (µs) of the scheduler core, {arguments.tasks:,} tasks")
    for count, value in by_workers:
        print(f"  {count:>5} workers, 1 client:    {value:6.1f}")
    for count, value in by_clients:
        print(f"  100 workers, {count:>3} clients:  {value:6.1f}")
    print(f"  1,000 / 10 workers: {by_workers[-1][1] / by_workers[0][1]:.2f}x;  "
          f"100 / 1 clients: {by_clients[-1][1] / by_clients[0][1]:.2f}x")  # fmt: skip
    SVG.write_text(svg(by_workers, by_clients))
    print(f"  plot: {SVG}")
    for queued in (int(text) for text in arguments.queued.split(",")):
        per_task, before, after = memory(queued)
        print(f"{queued:>9,} queued: {per_task:6.0f} bytes per queued task; RSS {before:.0f} MB before, "
              f"{after:.0f} MB after they all ran", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
