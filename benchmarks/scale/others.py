"""Other systems' figures beside ours: Dask's scheduler measured here, on the same machine, the same way (its process's
CPU seconds and RSS), and Ray's published figure.

    cd benchmarks && ../.venv/bin/python -m scale.others --out scale/results/others.json   # builds Dask's venv once

Dask runs in its own virtual environment (benchmarks/.venvs/dask, `harness.systems`): a `dask scheduler` process,
then (1) tasks queued with no worker (`Client.map` of a no-op, `pure=False`): its RSS growth per queued task; (2) two
`dask worker` processes of one thread each and no-op tasks run through, 20,000 unanswered at most: its CPU per
task. Ray is not measured (its release tests' figure is quoted: 1,000,000 tasks queued in 184 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

DASK_SIDE = """
import json, sys, time
import psutil
from distributed import Client

address, pid, queued = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
scheduler = psutil.Process(pid)

def noop(x):
    return x

with Client(address) as client:
    time.sleep(2)
    start = scheduler.memory_info().rss
    futures = client.map(noop, range(queued), pure=False)
    deadline = time.time() + 600
    while time.time() < deadline:
        counts = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        if counts >= queued:
            break
        time.sleep(1)
    time.sleep(2)
    peak = scheduler.memory_info().rss
    client.cancel(futures)
    del futures
    print(json.dumps({"queued": queued, "rss_mb_start": start / 2**20, "rss_mb_queued": peak / 2**20,
                      "bytes_per_queued_task": (peak - start) / queued}), flush=True)
"""

DASK_TASKS = """
import json, sys, time
import psutil
from distributed import Client, as_completed

address, pid, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
scheduler = psutil.Process(pid)

def noop(x):
    return x

def cpu():
    times = scheduler.cpu_times()
    return times.user + times.system

with Client(address) as client:
    client.wait_for_workers(2, timeout=120)
    client.submit(noop, -1, pure=False).result()
    window, sent, done = 20000, 0, 0
    began, started = cpu(), time.monotonic()
    pending = as_completed(client.map(noop, range(min(window, tasks)), pure=False))
    sent = min(window, tasks)
    for future in pending:
        future.release()
        done += 1
        if sent < tasks:
            pending.add(client.submit(noop, sent, pure=False))
            sent += 1
    spent, wall = cpu() - began, time.monotonic() - started
    print(json.dumps({"tasks": tasks, "cpu_per_task_us": spent / tasks * 1e6, "tasks_per_second": tasks / wall}),
          flush=True)
"""


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def dask(queued: int, tasks: int) -> dict[str, float]:
    from harness.systems import ensure_venv

    python = ensure_venv("dask", sys.executable)
    found: dict[str, float] = {}
    for phase in ("queue", "tasks"):
        port = _free_port()
        address = f"tcp://127.0.0.1:{port}"
        scheduler = subprocess.Popen([str(python), "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                      "--port", str(port), "--dashboard-address", ":0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        workers: list[subprocess.Popen[bytes]] = []
        try:
            time.sleep(5)
            if phase == "queue":
                command = [str(python), "-c", DASK_SIDE, address, str(scheduler.pid), str(queued)]
            else:
                worker = [str(python), "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                          "--memory-limit", "0", "--no-dashboard"]  # fmt: skip
                quiet = subprocess.DEVNULL
                workers = [subprocess.Popen(worker, stdout=quiet, stderr=quiet) for _ in range(2)]
                command = [str(python), "-c", DASK_TASKS, address, str(scheduler.pid), str(tasks)]
            output = subprocess.run(command, capture_output=True, text=True, timeout=1800)
            if output.returncode != 0:
                raise RuntimeError(f"dask's {phase} run failed: {output.stderr[-2000:]}")
            found.update(json.loads(output.stdout.splitlines()[-1]))
        finally:
            for process in [*workers, scheduler]:
                process.terminate()
            for process in [*workers, scheduler]:
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--out", type=Path, required=True)
    arguments = parser.parse_args()
    measured = dask(arguments.queued, arguments.tasks)
    print(f"Dask {measured}", flush=True)
    others = {
        "Dask (measured)": measured,
        "Dask (documented)": {"cpu_per_task_us": 200.0, "bytes_per_queued_task": 1000.0},
        "Ray (release tests)": {"queued_tasks": 1_000_000, "queue_seconds": 184.0},
    }
    arguments.out.write_text(json.dumps(others, indent=1) + "\n")


if __name__ == "__main__":
    main()
