"""A processor's own cost per task: `TaskThreads` serving tiny tasks over its socket pair, nothing else in the way.

    PYTHONPATH=. python benchmarks/processor_queue.py [--tasks 100000] [--windows 1,16] [--rounds 3]

A forked child runs `TaskThreads` (scaler/worker/task_threads.py) on its end of a socket pair, with a trivial
`execute` (a SUCCESS result; no object storage, no user function). The parent plays the agent: it keeps
`window` tasks in flight, refilling in one write whenever results arrive (a staging agent; window 1 is one task
per round trip, an agent that does not stage). Per window it reports the median over the rounds of:
- wall microseconds per task (throughput of the pair: agent and processor run on their own cores if there are two);
- the processor's CPU microseconds per task (its user + system time from wait4, divided by the tasks): the
  figure a change to the processor's loop moves;
- how many results the agent's reads saw (mean per read).

To measure the code before a change, run the same file with PYTHONPATH pointing at the other checkout, e.g.
`PYTHONPATH=/work/main python benchmarks/processor_queue.py`. Not a test.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from dataclasses import dataclass

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.worker.processor_channel import BlockingChannel, FrameReader, encode_frames
from scaler.worker.task_threads import TaskThreads


@dataclass(frozen=True)
class Round:
    wall_us_per_task: float
    processor_cpu_us_per_task: float
    results_per_read: float


def trivial_result(task: m.Task) -> m.TaskResult:
    return m.TaskResult(task.task_id, m.ResultStatus.SUCCESS)


def serve(channel_socket: socket.socket) -> None:
    """The child: a processor's task loop with a trivial execute, until the agent closes the channel."""
    threads = TaskThreads(BlockingChannel(channel_socket), trivial_result, lambda _: None, lambda: None, 30.0)
    threads.run()


def run_round(frames: list[bytes], window: int) -> Round:
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
        data = agent_end.recv(1 << 20)
        if not data:
            raise RuntimeError("the processor closed the channel")
        results = reader.feed(data)
        reads += 1
        received += len(results)
        if sent < total and results:
            more = frames[sent : sent + len(results)]
            agent_end.sendall(encode_frames(more))
            sent += len(more)
    wall = time.perf_counter() - started
    last = codec.decode(results[-1])
    assert isinstance(last, m.TaskResult) and last.status is m.ResultStatus.SUCCESS, last
    agent_end.close()
    _, status, usage = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    return Round(wall / total * 1e6, (usage.ru_utime + usage.ru_stime) / total * 1e6, received / reads)


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
    print(f"{'window':>6} {'wall us/task':>13} {'processor cpu us/task':>22} {'results/read':>13}")
    for window in (int(w) for w in options.windows.split(",")):
        rounds = [run_round(frames, window) for _ in range(options.rounds)]
        print(
            f"{window:>6} {statistics.median(r.wall_us_per_task for r in rounds):>13.2f}"
            f" {statistics.median(r.processor_cpu_us_per_task for r in rounds):>22.2f}"
            f" {statistics.median(r.results_per_read for r in rounds):>13.2f}"
        )


if __name__ == "__main__":
    main()
