"""W3's round trip, hop by hop: what each thread of each process does on the CPU per round trip, and how long it
waits to get a CPU once woken, for ours and for the do-nothing broker (`broker_floor.py`), from the kernel's own
record of every context switch (`perf sched record`, then `perf sched timehist`).

    python benchmarks/w3_hops.py [--seconds 0.5] [--rounds 2]

Each system runs sequential round trips (`submit(inc, i).result()` for ours, 2 workers; a pickled `(inc, i)` through
the broker for the floor) while `perf sched` records the whole machine for `--seconds`; the rounds alternate the two.
Per round trip and per thread role, it prints:

  * runs: how many times the thread got a CPU (each is a wake-up: a hop, or a hand-over inside a process);
  * on-CPU: the CPU time those runs took (Python, the kernel, ZeroMQ);
  * delay: the time from its wake-up to its run (a woken thread waits that long for a CPU: on an idle core of a
    virtual machine, the core's own wake-up).

A round trip's wall time is about the sum of the on-CPU and delay columns of the threads on its path, so this says
which hop costs what. Needs root and `perf` (Debian's `linux-perf`); without them it says so and exits 2. Not a test.
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_floor import start_floor

#: `perf sched timehist` lines: time, [cpu], task name[tid/pid] or [tid], wait, sch delay, run time (ms)
_LINE = re.compile(r"^\s*([\d.]+)\s+\[\d+\]\s+(.+?)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def inc(x: int) -> int:
    return x + 1


def _roles(client_pid: int, titles: dict[int, str]) -> dict[int, str]:
    """Each thread of the client and of its descendants, named by process (`titles`, else its name) and thread:
    `schedule/main`, `processo/zmq-io`, `client/thread`..."""
    names: dict[int, str] = {}
    for process in [psutil.Process(client_pid), *psutil.Process(client_pid).children(recursive=True)]:
        try:
            title = "client" if process.pid == client_pid else process.name().removeprefix("scaler-")
            title = titles.get(process.pid, title)
            for thread in process.threads():
                try:
                    comm = Path(f"/proc/{process.pid}/task/{thread.id}/comm").read_text().strip()
                except OSError:
                    continue
                kind = "main" if thread.id == process.pid else ("zmq-io" if comm.startswith("ZMQbg") else "thread")
                names[thread.id] = f"{title}/{kind}"
        except psutil.Error:
            continue
    return names


def _record(seconds: float, folder: str) -> list[tuple[float, int, float, float]]:
    """(time, tid, sch delay ms, run ms) of every switch-out on the machine over `seconds`; the times are
    `time.monotonic()`'s (perf's clock set to CLOCK_MONOTONIC)."""
    data = os.path.join(folder, "sched.data")
    subprocess.run(
        ["perf", "sched", "record", "-k", "CLOCK_MONOTONIC", "-a", "-o", data, "--", "sleep", str(seconds)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=seconds + 30,
    )  # fmt: skip
    text = subprocess.run(
        ["perf", "sched", "timehist", "-i", data], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    rows = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            time_, tid = float(match.group(1)), int(match.group(3))
            rows.append((time_, tid, float(match.group(6)), float(match.group(7))))
    return rows


def _measure(
    round_trip: Callable[[int], None], seconds: float, client_pid: int, titles: dict[int, str]
) -> dict[str, tuple[float, ...]]:
    """Round trips on a thread while the machine is recorded: per role (runs, on-CPU us, delay us) per round trip."""
    stop, ended = threading.Event(), []

    def loop() -> None:
        i = 0
        while not stop.is_set():
            round_trip(i)
            ended.append(time.monotonic())
            i += 1

    runner = threading.Thread(target=loop, daemon=True)
    runner.start()
    time.sleep(0.3)
    roles = _roles(client_pid, titles)
    roles[threading.get_native_id()] = "client/recorder"  # this thread: it waits for perf
    with tempfile.TemporaryDirectory(prefix="w3-hops-") as folder:
        rows = _record(seconds, folder)
    stop.set()
    runner.join(10)
    totals: dict[str, list[float]] = {}
    for _, tid, delay, run in rows:
        role = "client/caller" if tid == runner.native_id else roles.get(tid)
        if role is None or role == "client/recorder":
            continue
        row = totals.setdefault(role, [0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += run * 1000
        row[2] += delay * 1000
    first, last = (rows[0][0], rows[-1][0]) if rows else (0.0, 0.0)
    trips = max(1, sum(1 for at in ended if first <= at <= last))
    return {role: (runs / trips, cpu / trips, delay / trips) for role, (runs, cpu, delay) in totals.items()}


def _print(title: str, figures: list[dict[str, tuple[float, ...]]]) -> None:
    print(f"\n{title}: per round trip, median of {len(figures)} round(s)")
    print(f"  {'thread':<22}{'runs':>7}{'on-CPU us':>12}{'delay us':>11}")
    roles = sorted({role for figure in figures for role in figure})
    sums = [0.0, 0.0]
    for role in roles:
        values = [figure.get(role, (0.0, 0.0, 0.0)) for figure in figures]
        runs, cpu, delay = (statistics.median(v[i] for v in values) for i in range(3))
        if runs < 0.05:
            continue
        sums[0] += cpu
        sums[1] += delay
        print(f"  {role:<22}{runs:>7.2f}{cpu:>12.1f}{delay:>11.1f}")
    print(f"  {'all':<22}{'':>7}{sums[0]:>12.1f}{sums[1]:>11.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=0.5, help="how long each round is recorded")
    parser.add_argument("--rounds", type=int, default=2)
    arguments = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("perf") is None:
        print("w3_hops.py needs root and perf (apt install linux-perf)", file=sys.stderr)
        raise SystemExit(2)
    from scaler import Client, SchedulerClusterCombo

    front, floor_processes = start_floor("fork")
    titles = {floor_processes[0].pid: "floor-broker"}
    titles.update((process.pid, "floor-worker") for process in floor_processes[1:])
    context = zmq.Context()
    floor = context.socket(zmq.DEALER)
    floor.connect(front)

    def floor_trip(i: int) -> None:
        floor.send(pickle.dumps((inc, i)))
        pickle.loads(floor.recv())

    ours_rounds: list[dict[str, tuple[float, ...]]] = []
    floor_rounds: list[dict[str, tuple[float, ...]]] = []
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    try:
        with SchedulerClusterCombo(n_workers=2, logging_level="WARNING") as cluster:
            with Client(cluster.get_address()) as client:

                def ours_trip(i: int) -> None:
                    client.submit(inc, i).result()

                for i in range(500):
                    ours_trip(i)
                    floor_trip(i)
                for _ in range(arguments.rounds):
                    floor_rounds.append(_measure(floor_trip, arguments.seconds, os.getpid(), titles))
                    ours_rounds.append(_measure(ours_trip, arguments.seconds, os.getpid(), titles))
    finally:
        floor.close(0)
        context.term()
        for process in floor_processes:
            process.kill()
    _print("do-nothing broker", floor_rounds)
    _print("ours (W3, 2 workers)", ours_rounds)


if __name__ == "__main__":
    main()
