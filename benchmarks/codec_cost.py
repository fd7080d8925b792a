"""The codec's cost per message on the hot paths: a batch of 1,000 tasks and one of 1,000 results encoded and
decoded (as the client, the scheduler, the worker agent and the processor do), task bodies, and a status
snapshot of 200 workers (the monitor feed).

    python benchmarks/codec_cost.py [--repeat 15]

Prints, for each case, the best and the median CPU microseconds per message over `--repeat` rounds (the process's
CPU time, which a busy machine inflates less than the wall clock). To compare two versions of the codec on one
machine, run it under each in turn, alternating (for example with `PYTHONPATH=/path/to/other/checkout`), and
compare the best times.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, ObjectID, TaskID

BATCH = 1_000


def tasks() -> list[m.Task]:
    body = codec.encode_body(
        m.TaskBody(ObjectID(b"f" * 16), (m.Argument(m.ArgumentKind.INLINE, b"\x80\x05K\x07."),), ObjectID(b""))
    )
    client = ClientID(b"Client|" + b"c" * 32)
    return [
        m.Task(TaskID(index.to_bytes(16, "big")), client, body, "module.inc", 1 << m.PRIORITY_DEPTH_BITS)
        for index in range(BATCH)
    ]


def results() -> list[m.TaskResult]:
    return [
        m.TaskResult(
            TaskID(index.to_bytes(16, "big")),
            m.ResultStatus.SUCCESS,
            m.PayloadKind.INLINE,
            b"\x80\x05K\x08." * 20,
            worker_id=b"Worker|FIX|" + b"w" * 32,
            ran=m.RunStamps(1.7e9, 1.7e9 + 0.001, 4242, 1.7e9 - 0.0001),
        )
        for index in range(BATCH)
    ]


def snapshot() -> m.StatusSnapshot:
    status = m.WorkerStatus(1, 1, 0, 1 << 33, (m.ProcessorStatus(4242, 50.0, 1 << 28, "running", 1 << 27),))
    workers = tuple(
        m.WorkerSummary(b"Worker|FIX|%032d" % index, "mgr", (("cpu", 1),), 2, 1, status, 10.0, 1 << 28, 0.5, "host")
        for index in range(200)
    )
    return m.StatusSnapshot(1.0, m.SchedulerStats("tcp://127.0.0.1:8516"), workers)


def cases() -> dict[str, tuple[Callable[[], object], int]]:
    task_values, result_values = tasks(), results()
    task_frames = [codec.encode(task) for task in task_values]
    result_frames = [codec.encode(result) for result in result_values]
    bodies = [codec.decode_body(task.body) for task in task_values]
    status = snapshot()
    status_frame = codec.encode(status)
    return {
        "encode Task": (lambda: [codec.encode(task) for task in task_values], BATCH),
        "decode Task (scheduler, forwarding)": (lambda: [codec.decode(f, forwarding=True) for f in task_frames], BATCH),
        "decode Task": (lambda: [codec.decode(frame) for frame in task_frames], BATCH),
        "encode TaskResult": (lambda: [codec.encode(result) for result in result_values], BATCH),
        "decode TaskResult": (lambda: [codec.decode(frame) for frame in result_frames], BATCH),
        "encode TaskBody": (lambda: [codec.encode_body(body) for body in bodies], BATCH),
        "decode TaskBody": (lambda: [codec.decode_body(task.body) for task in task_values], BATCH),
        "encode StatusSnapshot (200 workers)": (lambda: codec.encode(status), 1),
        "decode StatusSnapshot (200 workers)": (lambda: codec.decode(status_frame), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    for name, (run, count) in cases().items():
        run()  # warm-up
        rounds = []
        for _ in range(options.repeat):
            started = time.process_time()
            run()
            rounds.append((time.process_time() - started) / count * 1e6)
        print(f"{name:40s} best {min(rounds):8.2f} us  median {statistics.median(rounds):8.2f} us per message")


if __name__ == "__main__":
    main()
