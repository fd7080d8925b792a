"""A processor's own cost per task: `TaskThreads` serving tiny tasks over its socket pair, nothing else in the way.

    PYTHONPATH=. python benchmarks/processor_queue.py [--tasks 100000] [--windows 1,16] [--rounds 3]

First, the processor's loop alone (`in process`): on this thread, 1,000 tasks written before it starts and
read in one go, results left in the socket, a trivial `execute`: what decoding, bookkeeping and sending cost
per task, with no other process and no wake-up. The figure to compare a change of the loop by.

Then a forked child runs `TaskThreads` (scaler/worker/processor/threads.py) on its end of a socket pair, with the
same `execute`, and the parent plays the agent, in two modes:
- `batches`: it writes `window` tasks at once and waits for all their results before the next write (window 1
  is one task per round trip: an agent that does not stage);
- `sliding`: it keeps `window` tasks in flight, writing as many new ones as results each read brought (a
  staging agent).
These include the wake-ups of two processes ping-ponging on two cores (about 20 us each on a 2-vCPU VM), so
they depend on timing as much as on work: when results come evenly spaced, the agent waits in select for each
and every result costs a wake-up; when they come in bursts, it finds several waiting. A processor that reads
each staged task as it comes (before starting it) spaces its results evenly, one that reads them in bulk does
not: the sliding figures of such two can differ by 20 us a task for that reason alone.
The agent waits for results in select() before each recv, as the real agent's event loop waits in epoll.
Per mode and window it reports the median over the rounds of: wall microseconds per task; the processor's
CPU microseconds per task (its user + system time from wait4, divided by the tasks); how many results the
agent's reads saw (mean per read).

To measure the code before a change, run the same file with PYTHONPATH pointing at the other checkout, e.g.
`PYTHONPATH=/path/to/the/other/checkout python benchmarks/processor_queue.py`. Not a test.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import time
from dataclasses import dataclass

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.worker.processor.channel import BlockingChannel, FrameReader, encode_frames
from scaler.worker.processor.outlet import ProcessorOutlet
from scaler.worker.processor.threads import TaskThreads

#: tasks per in-process run (their frames and results must fit in the socket buffers)
IN_PROCESS_CHUNK = 1000


@dataclass(frozen=True)
class Round:
    wall_us_per_task: float
    processor_cpu_us_per_task: float
    results_per_read: float


def trivial_result(task: m.Task) -> m.TaskResult:
    return m.TaskResult(task.task_id, m.ResultStatus.SUCCESS)


def serve(channel_socket: socket.socket) -> None:
    """The child: a processor's task loop with a trivial execute, until the agent closes the channel."""
    channel = BlockingChannel(channel_socket)
    threads = TaskThreads(channel, ProcessorOutlet(channel), trivial_result, lambda _: None, lambda: None, 30.0)
    threads.run()


def run_round(frames: list[bytes], window: int, lockstep: bool) -> Round:
    agent_end, processor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the processor
        agent_end.close()
        code = 1
        try:
            serve(processor_end)
            code = 0
        finally:
            os._exit(code)
    processor_end.close()
    reader = FrameReader()
    total, sent, received, reads = len(frames), 0, 0, 0
    started = time.perf_counter()
    agent_end.sendall(encode_frames(frames[:window]))
    sent = min(window, total)
    while received < total:
        select.select([agent_end], [], [])  # not a bare blocking recv: see the module docstring
        data = agent_end.recv(1 << 20)
        if not data:
            raise RuntimeError("the processor closed the channel")
        results = reader.feed(data)
        reads += 1
        received += len(results)
        if sent == total or not results or (lockstep and received < sent):
            continue
        more = frames[sent : sent + (window if lockstep else len(results))]
        agent_end.sendall(encode_frames(more))
        sent += len(more)
    wall = time.perf_counter() - started
    last = codec.decode(results[-1])
    assert isinstance(last, m.TaskResult) and last.status is m.ResultStatus.SUCCESS, last
    agent_end.close()
    _, status, usage = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    return Round(wall / total * 1e6, (usage.ru_utime + usage.ru_stime) / total * 1e6, received / reads)


def in_process_us_per_task(frames: list[bytes]) -> float:
    """The processor's loop alone, on this thread: `frames` written at once before it starts, read by it in one
    go, results left in the socket; it stops when the last task ends the channel. No second process, so no
    wake-ups: the pure cost of decoding, bookkeeping, executing trivially and sending, per task."""
    agent_end, processor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for end in (agent_end, processor_end):  # the tasks and the results fit in the socket buffers
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    agent_end.sendall(encode_frames(frames))
    remaining = len(frames)

    def execute(task: m.Task) -> m.TaskResult:
        nonlocal remaining
        remaining -= 1
        if not remaining:
            agent_end.shutdown(socket.SHUT_WR)  # the processor's next read ends run()
        return trivial_result(task)

    channel = BlockingChannel(processor_end)
    threads = TaskThreads(channel, ProcessorOutlet(channel), execute, lambda _: None, lambda: None, 30.0, b"Worker|b")
    started = time.perf_counter()
    threads.run()
    elapsed = time.perf_counter() - started
    agent_end.close()
    processor_end.close()
    return elapsed / len(frames) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--windows", default="1,16", help="tasks in flight, comma separated")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    frames = [
        codec.encode(m.Task(TaskID(i.to_bytes(16, "big")), ClientID(b"bench"), b"", "noop"))
        for i in range(options.tasks)
    ]
    print(f"{options.tasks} tasks, {options.rounds} rounds, medians")
    chunks = [frames[i : i + IN_PROCESS_CHUNK] for i in range(0, len(frames), IN_PROCESS_CHUNK)]
    in_process = [statistics.median(in_process_us_per_task(chunk) for chunk in chunks) for _ in range(options.rounds)]
    print(f"in process, {IN_PROCESS_CHUNK} tasks read at once: {statistics.median(in_process):.2f} us/task")
    print(f"{'mode':>8} {'window':>6} {'wall us/task':>13} {'processor cpu us/task':>22} {'results/read':>13}")
    for lockstep in (True, False):
        for window in (int(w) for w in options.windows.split(",")):
            if window == 1 and not lockstep:
                continue  # the same as lockstep
            rounds = [run_round(frames, window, lockstep) for _ in range(options.rounds)]
            print(
                f"{'batches' if lockstep else 'sliding':>8} {window:>6}"
                f" {statistics.median(r.wall_us_per_task for r in rounds):>13.2f}"
                f" {statistics.median(r.processor_cpu_us_per_task for r in rounds):>22.2f}"
                f" {statistics.median(r.results_per_read for r in rounds):>13.2f}"
            )


if __name__ == "__main__":
    main()
