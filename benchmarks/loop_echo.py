"""The CPU a shell's loop spends per message it answers at once (`scaler.io.zmq_async`: a drain, the handler, an
outbox flushed at the burst's end), this checkout against an earlier tree, alternated in one run:

    git archive <commit> scaler | tar -x -C /tmp/before     # the earlier tree (its `scaler` package only)
    python benchmarks/loop_echo.py --before /tmp/before [--rounds 5] [--messages 20000]

Each run is a fresh process of this interpreter: a ROUTER on an asyncio loop in a thread echoes every message through
an `Outbox` its burst end flushes (as the scheduler's server does), over inproc (no ZeroMQ I/O thread, no TCP); the
main thread sends one message and waits for its echo, one after the other. Prints the loop thread's CPU per message
(its own clock, `time.thread_time`, so other processes' load counts little) and the round trip, then the medians.
An actor's call crosses the scheduler's loop twice (docs/performance.md). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

WARMUP = 200


def run(messages: int) -> dict[str, float]:
    """One run, in this process: the loop thread's CPU (µs) and the round trip (µs) per message."""
    import zmq

    from scaler.io.zmq_async import AsyncSocket, Outbox

    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.bind("inproc://loop-echo")
    dealer = context.socket(zmq.DEALER)
    dealer.connect("inproc://loop-echo")
    started, stop = threading.Event(), threading.Event()
    loop_cpu: list[float] = []

    def serve() -> None:
        loop = asyncio.new_event_loop()
        outboxes: list[Any] = []
        sock = AsyncSocket(
            loop, router, lambda frames: outboxes[0].send(frames[0], frames[1]), copy=False,
            on_burst_end=lambda: outboxes[0].flush_unless_held(),
        )  # fmt: skip
        try:
            outboxes.append(Outbox(loop, sock, routed=True, flushed_at_burst_end=True))
        except TypeError:  # an earlier tree's Outbox
            outboxes.append(Outbox(loop, sock, routed=True))

        async def until_stopped() -> None:
            started.set()
            began = time.thread_time()
            await asyncio.to_thread(stop.wait)  # on another thread: its CPU is not the loop's
            loop_cpu.append(time.thread_time() - began)

        loop.run_until_complete(until_stopped())
        sock.close()
        loop.close()

    thread = threading.Thread(target=serve)
    thread.start()
    started.wait(10)
    for _ in range(WARMUP):
        dealer.send(b"x")
        dealer.recv()
    began = time.perf_counter()
    for _ in range(messages):
        dealer.send(b"x")
        dealer.recv()
    wall = time.perf_counter() - began
    stop.set()
    thread.join(10)
    dealer.close(linger=0)
    context.term()
    return {"loop_cpu_us": 1e6 * loop_cpu[0] / messages, "round_trip_us": 1e6 * wall / messages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="a source tree whose `scaler` package is the earlier code")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.run:
        print(json.dumps(run(arguments.messages)), flush=True)
        return
    checkout = str(Path(__file__).resolve().parent.parent)
    sides = {"this checkout": checkout, "before": str(Path(arguments.before).resolve())}
    figures: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    print(f"load before: {os.getloadavg()}", flush=True)
    for number in range(arguments.rounds):
        order = list(sides.items()) if number % 2 == 0 else list(reversed(sides.items()))
        for side, tree in order:
            environment = {**os.environ, "PYTHONPATH": tree}
            command = [sys.executable, __file__, "--run", "--before", arguments.before]
            command += ["--messages", str(arguments.messages)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment, cwd="/")
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                print(f"{side}: failed: {done.stderr[-800:]}", flush=True)
                continue
            figure = json.loads(lines[-1])
            figures[side].append(figure)
            print(f"{side:14} loop CPU {figure['loop_cpu_us']:.1f} µs a message, round trip "
                  f"{figure['round_trip_us']:.1f} µs", flush=True)  # fmt: skip
    for side, runs in figures.items():
        if runs:
            cpu = statistics.median(r["loop_cpu_us"] for r in runs)
            trip = statistics.median(r["round_trip_us"] for r in runs)
            print(f"{side:14} median loop CPU {cpu:.1f} µs a message, round trip {trip:.1f} µs ({len(runs)} runs)")
    print(f"load after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
