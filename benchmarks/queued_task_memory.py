"""The scheduler's memory per queued task, in process: one client's tasks (a no-op call's body, 100 to a frame) through
the real shell's inbound handler (`SchedulerServer._on_frames`, sockets replaced as in scheduler_cost.py), no worker.

    python benchmarks/queued_task_memory.py [--tasks 100000] [--rss-only]
    PYTHONPATH=/path/to/another/tree python benchmarks/queued_task_memory.py   # another tree's scheduler

Prints the RSS growth per task and, unless `--rss-only` (tracemalloc makes the RSS figure meaningless), the traced
bytes per task by the line that allocated them (benchmarks/notes/scale.md, "Memory per queued task"). What it leaves
out: ZeroMQ's buffers and glibc's heap around the frames (the scale harness's queue axis measures the real process).
Not a test.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

import psutil
import zmq
from scheduler_cost import BODY, PYTHON, Outbox, Router, Sockets

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore
from scaler.scheduler.server import SchedulerServer

BATCH = 100  #: tasks per frame, as a client's submit loop joins them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rss-only", action="store_true", help="no tracemalloc: the RSS figure only")
    arguments = parser.parse_args()
    tasks = arguments.tasks
    core = SchedulerCore(CoreSettings("tcp://s:1", "tcp://s:2", PYTHON))
    server = SchedulerServer(core, "tcp://s:1", "tcp://s:3", "tcp://s:2", Sockets())  # type: ignore[arg-type]
    server._outbox = Outbox()  # type: ignore[assignment]
    server._now = lambda: 1.0  # type: ignore[method-assign]
    router = Router()
    server._router = router  # type: ignore[assignment]
    client = PeerID(b"Client|fake|c000000")
    hello = m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "h", m.ClientInfo())
    server._on_frames([zmq.Frame(client), zmq.Frame(codec.encode(hello))])
    frames = [
        codec.encode(m.Task(TaskID(b"abcdefgh" + number.to_bytes(8, "big")), ClientID(client), BODY, "noop"))
        for number in range(tasks)
    ]
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    if not arguments.rss_only:
        tracemalloc.start(1)
        first = tracemalloc.take_snapshot()
    for start in range(0, tasks, BATCH):
        router.in_burst = True
        server._on_frames([zmq.Frame(client), zmq.Frame(b"".join(frames[start : start + BATCH]))])
        router.in_burst = False
        server._burst_end()
    gc.collect()
    print(f"RSS growth per queued task: {(process.memory_info().rss - before) / tasks:.0f} bytes")
    if arguments.rss_only:
        return
    lines = tracemalloc.take_snapshot().compare_to(first, "lineno")
    print(f"traced per queued task: {sum(line.size_diff for line in lines) / tasks:.0f} bytes, by line:")
    for line in lines[:12]:
        print(f"  {line.size_diff / tasks:7.1f}  {line.count_diff:>9,} blocks  {line.traceback}")


if __name__ == "__main__":
    main()
