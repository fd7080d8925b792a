"""The scheduler process's CPU per task in U1's shape (real processes): tasks of about 2 ms, each reading a window
of one array sent once with `send_object`, whose arguments are the array's reference and a small int.

    python benchmarks/scheduler_u1_cost.py [--tasks 5000] [--megabytes 50]
        [--rounds 3] [--event-loop builtin|uvloop] [--insecure] [--ipc] [--tiny] [--before /tmp/before]
        [--parts] [--profile DIR] [--attach COMMAND]

Each round is a fresh process of this interpreter with a local cluster of 2 workers (as run.py's); with `--before
TREE`, rounds alternate this checkout and that tree (its `scaler` first on PYTHONPATH), so that both see the same
load. psutil reads the scheduler process before and after the tasks: its CPU (user + system), its context switches,
and its threads (the main thread runs the event loop and the core; the next is ZeroMQ's I/O thread, where TCP and
CURVE run). Other processes' load counts little in CPU per task, far less than in wall time; say the load anyway.

`--tiny`: the same tasks without the array (an int only), to tell what the object reference costs from what the
spacing of 2 ms tasks costs (a result at a time reaches the scheduler: a step, a loop iteration and two sends per
task, where W1's results come in bursts; `scheduler_cost.py --spaced` is that shape without sockets).
`--profile DIR`: `SCALER_PROFILE_DIR` for the cluster (its scheduler, agents and processors write
`<component>-<pid>.prof` there when they stop; the scheduler's top functions are printed). `--attach COMMAND`: a
command run on the scheduler over the measured part ({pid}: its pid; stopped with SIGINT), e.g.
`perf record -g -o /tmp/s.perf -p {pid}` or `strace -f -c -o /tmp/s.txt -p {pid}`. `--parts`: the scheduler's
main thread CPU per part of its shell (the loop, epoll, reads, decode, the core's step, encode, sends), from wrappers
that `scheduler_parts/sitecustomize.py` puts around them in the rounds' processes (they cost CPU themselves: compare
parts, not totals). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil

#: each task reads this many consecutive float64 of the array (U1's window: about 2 ms of numpy)
WINDOW = 250_000
WARMUP_TASKS = 200


def monte_carlo(array: Any, seed: int) -> float:
    import numpy

    start = (seed * 7_919) % (len(array) - WINDOW)
    window = array[start : start + WINDOW]
    return float(numpy.sqrt(window * window + 1.0).sum())


def spin(seed: int) -> float:
    """About the same CPU as `monte_carlo`, no object argument."""
    import numpy

    window = numpy.arange(WINDOW, dtype=numpy.float64) + seed
    return float(numpy.sqrt(window * window + 1.0).sum())


def scheduler_of(address: str) -> psutil.Process:
    """The cluster's scheduler: the child listening on its TCP port (on ipc, the one named `scaler-scheduler`)."""
    port = int(address.rsplit(":", 1)[1]) if address.startswith("tcp://") else None
    for process in psutil.Process().children(recursive=True):
        try:
            if port is None and process.name().startswith("scaler-schedul"):
                return process
            if port is not None and any(
                c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in process.net_connections("tcp")
            ):
                return process
        except psutil.Error:
            continue
    raise RuntimeError(f"no child process listens on {address}")


def cpu_of(process: psutil.Process) -> dict[str, Any]:
    times, switches = process.cpu_times(), process.num_ctx_switches()
    threads = {thread.id: thread.user_time + thread.system_time for thread in process.threads()}
    return {"cpu": times.user + times.system, "voluntary": switches.voluntary, "threads": threads}


def attached(command: str | None, pid: int) -> subprocess.Popen[bytes] | None:
    if not command:
        return None
    process = subprocess.Popen(shlex.split(command.replace("{pid}", str(pid))), stdout=subprocess.DEVNULL)
    time.sleep(1.0)  # let it attach
    return process


def parts_of(pid: int) -> dict[str, Any] | None:
    """What `scheduler_parts/sitecustomize.py` last wrote for the scheduler (None without `--parts`)."""
    directory = os.environ.get("SCHEDULER_PARTS_DIR")
    if not directory:
        return None
    time.sleep(0.6)  # its next write (every half second)
    with open(os.path.join(directory, f"parts-{pid}.json")) as written:
        return dict(json.load(written))


def parts_per_task(before: dict[str, Any] | None, after: dict[str, Any] | None, tasks: int) -> list[list[Any]]:
    """[part, µs of the main thread's CPU per task, calls per task], the main thread's whole first."""
    if before is None or after is None:
        return []
    rows: list[list[Any]] = [["main thread (all)", (after["thread"] - before["thread"]) * 1e6 / tasks, 0.0]]
    for part in after["totals"]:  # in the order the wrappers were made (a part's calls below it, indented)
        spent = after["totals"][part] - before["totals"].get(part, 0.0)
        calls = after["counts"][part] - before["counts"].get(part, 0)
        rows.append([part, spent * 1e6 / tasks, calls / tasks])
    return rows


def one_round(arguments: argparse.Namespace) -> dict[str, Any]:
    """This process's round: a cluster, the warm-up, the measured tasks; the scheduler's figures per task."""
    if arguments.profile:
        os.makedirs(arguments.profile, exist_ok=True)
        os.environ["SCALER_PROFILE_DIR"] = os.path.abspath(arguments.profile)
    import numpy

    from scaler import Client, SchedulerClusterCombo

    settings: dict[str, Any] = {"n_workers": 2, "logging_level": "WARNING"}
    if arguments.event_loop is not None:
        settings["event_loop"] = arguments.event_loop
    array = numpy.random.default_rng(29).random(arguments.megabytes * (1 << 20) // 8)
    cluster_arguments: dict[str, Any] = {"insecure": True} if arguments.insecure else {}
    if arguments.ipc:  # unix sockets instead of TCP on the loopback (what the kernel's TCP costs per message)
        base = f"ipc:///tmp/scheduler-u1-cost-{os.getpid()}"
        cluster_arguments.update(
            address=f"{base}-scheduler", object_storage_address=f"{base}-storage", monitor_address=f"{base}-monitor"
        )
    with SchedulerClusterCombo(**cluster_arguments, **settings) as cluster, Client(cluster.get_address()) as client:
        scheduler = scheduler_of(cluster.get_address())
        shared = client.send_object(array)

        def run(count: int) -> None:
            if arguments.tiny:
                futures = [client.submit(spin, seed) for seed in range(count)]
            else:
                futures = [client.submit(monte_carlo, shared, seed) for seed in range(count)]
            [future.result() for future in futures]

        run(WARMUP_TASKS)
        watcher = attached(arguments.attach, scheduler.pid)
        me = psutil.Process()
        parts_before = parts_of(scheduler.pid)
        before, client_before, started = cpu_of(scheduler), sum(me.cpu_times()[:2]), time.perf_counter()
        run(arguments.tasks)
        seconds, after, client_after = time.perf_counter() - started, cpu_of(scheduler), sum(me.cpu_times()[:2])
        parts_after = parts_of(scheduler.pid)
        if watcher is not None:
            watcher.send_signal(signal.SIGINT)
            watcher.wait(60)
    per_task = 1e6 / arguments.tasks
    threads = [(after["threads"][tid] - before["threads"].get(tid, 0.0)) * per_task for tid in after["threads"]]
    return {
        "seconds": seconds,
        "cpu_us": (after["cpu"] - before["cpu"]) * per_task,
        "threads_us": sorted((figure for figure in threads if figure >= 0.05), reverse=True),
        "client_cpu_us": (client_after - client_before) * per_task,
        "parts": parts_per_task(parts_before, parts_after, arguments.tasks),
        "voluntary_switches": (after["voluntary"] - before["voluntary"]) * per_task / 1e6,
        "load": os.getloadavg()[0],
    }


def print_profiles(directory: str) -> None:
    for name in sorted(os.listdir(directory)):
        if name.startswith("scheduler-") and name.endswith(".prof"):
            stats = pstats.Stats(os.path.join(directory, name))
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=5_000)
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each version")
    parser.add_argument("--event-loop", choices=("builtin", "uvloop"), default=None, help="default: the version's")
    parser.add_argument("--ipc", action="store_true", help="the cluster on unix sockets (ipc://), not TCP")
    parser.add_argument("--insecure", action="store_true", help="plain TCP (what CURVE costs)")
    parser.add_argument("--tiny", action="store_true", help="tasks without the object argument")
    parser.add_argument("--before", metavar="TREE", help="alternate rounds with this tree's scaler")
    parser.add_argument("--profile", metavar="DIR", help="cProfile every cluster process into DIR")
    parser.add_argument("--parts", action="store_true", help="the scheduler's main thread CPU per part of its shell")
    parser.add_argument("--attach", metavar="COMMAND", help="a command run on the scheduler ({pid})")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.inner:
        print(json.dumps(one_round(arguments)))
        return
    inherited = os.environ.get("PYTHONPATH", "")
    versions = {"this checkout": inherited}
    if arguments.before:
        versions["before"] = os.pathsep.join(filter(None, [os.path.abspath(arguments.before), inherited]))
    if arguments.parts:  # every process of the rounds imports the wrappers at start; the scheduler writes its sums
        parts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scheduler_parts")
        os.environ["SCHEDULER_PARTS_DIR"] = tempfile.mkdtemp(prefix="scheduler-parts-")
        versions = {version: os.pathsep.join(filter(None, [parts, path])) for version, path in versions.items()}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    figures: dict[str, list[float]] = {version: [] for version in versions}
    for _ in range(arguments.rounds):
        for version, path in versions.items():
            environment = {**os.environ, "PYTHONPATH": path}
            command = [sys.executable, __file__, "--inner", *sys.argv[1:]]
            finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=900)
            if finished.returncode != 0:
                sys.exit(f"{version}: the round failed:\n{finished.stderr[-3000:]}")
            row = json.loads(finished.stdout.splitlines()[-1])
            figures[version].append(row["cpu_us"])
            for part, spent, calls in row["parts"]:
                print(f"    {part:28s} {spent:7.1f} us/task" + (f"  {calls:5.2f} calls/task" if calls else ""))
            print(
                f"{version:14s} {arguments.tasks} tasks in {row['seconds']:.2f} s: scheduler {row['cpu_us']:.1f} us "
                f"CPU/task (threads {', '.join(f'{figure:.1f}' for figure in row['threads_us'])}), "
                f"{row['voluntary_switches']:.2f} voluntary switches/task; client {row['client_cpu_us']:.0f} us/task; "
                f"load {row['load']:.1f}"
            )
    for version, values in figures.items():
        print(f"{version:14s} scheduler CPU per task: median {statistics.median(values):.1f} us ({len(values)} rounds)")
    if arguments.profile:
        print_profiles(arguments.profile)


if __name__ == "__main__":
    main()
