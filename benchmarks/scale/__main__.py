"""The scale harness: the real scheduler process against fake workers and clients, along three axes.

    cd benchmarks && ../.venv/bin/python -m scale --out scale/results/run.json
    cd benchmarks && ../.venv/bin/python -m scale --axes workers --workers 100,1000 --tasks 20000   # a quick look
    PYTHONPATH=/tmp/before ../.venv/bin/python -m scale --label before --out ...   # another tree's scheduler
    ../.venv/bin/python -m scale.plot scale/results/before.json scale/results/run.json --svg /tmp/scale.svg

Axes (`--axes`, all by default):
  workers  100 -> 10,000 fake workers: the scheduler's idle CPU (no status subscriber, then one), then its CPU per
           no-op task with one client keeping 20,000 tasks unanswered
  clients  1 -> 100 fake clients, 100 workers: CPU per task, then fair shares (all submit at once)
  queue    100k -> 1M tasks queued with no worker: bytes per queued task; then 100 workers run them, the client
           leaves, and the RSS after the drain (what share of the growth is kept)
  soak     repeated drains on one scheduler: the RSS after each must not grow
  client   a real Client: bytes per pending future; Client.map of 10 million small items (two real workers)
`--turns N` runs the workers and clients axes N times in turn (every size once, then every size again), and each
size's row gives the median over its N schedulers (`cpu_per_task_us`, `idle_cpu_percent`; each turn's figure in
`..._turns`): one scheduler's median moves by up to a sixth between runs of one configuration on a shared 2-core
machine, more than the gaps between sizes, so that sizes measured in different schedulers at different moments
compare badly.
Every run checks that nothing was lost or duplicated (each task answered once, sent to a worker once). Figures are
the scheduler process's own (CPU seconds and RSS, from psutil). Writes one JSON file; `scale.plot` draws it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import scaler
from scale import axes


def _numbers(text: str) -> list[int]:
    return [int(float(part)) for part in text.split(",") if part]


def _tree() -> dict[str, str]:
    """Which scheduler code ran: the scaler package's folder and its commit."""
    folder = Path(scaler.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        commit = os.environ.get("SCALE_TREE_COMMIT", "unknown")
    return {"scaler_folder": str(folder), "commit": os.environ.get("SCALE_TREE_COMMIT", commit)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--axes", default="workers,clients,queue,soak,client")
    parser.add_argument("--workers", default="100,1000,5000,10000", help="sizes of the workers axis")
    parser.add_argument("--clients", default="1,10,100", help="sizes of the clients axis")
    parser.add_argument("--workers-axis-clients", type=int, default=1, help="clients connected on the workers axis")
    parser.add_argument("--queue", default="100000,1000000", help="sizes of the queue axis")
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks run for each CPU-per-task figure")
    parser.add_argument(
        "--windows",
        type=int,
        default=1,
        help="task windows of --tasks each per scheduler; a CPU-per-task figure is their median",
    )
    parser.add_argument("--turns", type=int, default=1, help="the workers and clients axes run this many times in turn")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="how long idle CPU is measured")
    parser.add_argument("--soak-rounds", type=int, default=5)
    parser.add_argument("--soak-queue", type=int, default=200_000)
    parser.add_argument("--pending", default="100000,1000000", help="pending futures of a real client")
    parser.add_argument("--map-items", type=int, default=10_000_000, help="items of the real client's map (0: none)")
    parser.add_argument("--label", default="", help="what this run measured (e.g. before, after)")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/scale-logs"), help="the processes' logs")
    parser.add_argument("--out", type=Path, help="the JSON file to write")
    arguments = parser.parse_args()
    settings = axes.Settings(arguments.logs, arguments.tasks, arguments.idle_seconds, windows=arguments.windows,
                             workers_axis_clients=arguments.workers_axis_clients)  # fmt: skip
    chosen = set(arguments.axes.split(","))
    run: dict[str, Any] = {
        "label": arguments.label,
        "tree": _tree(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release()},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }

    def save() -> None:
        if arguments.out:
            arguments.out.parent.mkdir(parents=True, exist_ok=True)
            arguments.out.write_text(json.dumps(run, indent=1) + "\n")

    turns: dict[str, list[list[dict[str, Any]]]] = {"workers": [], "clients": []}
    for turn in range(max(1, arguments.turns)):
        if arguments.turns > 1:
            print(f"[turn {turn + 1} of {arguments.turns}]", flush=True)
        if "workers" in chosen:
            turns["workers"].append([])
            axes.workers_axis(settings, _numbers(arguments.workers), turns["workers"][-1], save)
            run["workers"] = axes.over_turns(turns["workers"], "workers")
            save()
        if "clients" in chosen:
            turns["clients"].append(axes.clients_axis(settings, _numbers(arguments.clients)))
            run["clients"] = axes.over_turns(turns["clients"], "clients")
            save()
    if "queue" in chosen:
        run["queue"] = axes.queue_axis(settings, _numbers(arguments.queue))
        save()
    if "soak" in chosen:
        run["soak"] = axes.soak_axis(settings, arguments.soak_rounds, arguments.soak_queue)
        save()
    if "client" in chosen:
        run["client"] = axes.client_axis(settings, _numbers(arguments.pending), arguments.map_items)
        save()
    run["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    save()


if __name__ == "__main__":
    main()
