"""Where does ours spend its time? Runs one workload of `ours` once, in this process, with

  * cProfile on the client: the main thread over the measured part, and the client's background threads
    (started after profiling is armed, so from cluster start on: warm-up included);
  * CPU accounting per process: psutil cpu_times (user + system) of every process of the cluster, before and
    after the measured part, printed per process, per role and per task.

    python benchmarks/profile_ours.py W1 [--quick] [--top 25]

Re-executes itself with the `ours` venv's python (built on first use, see run.py). W8 is profiled as a whole
(the cluster start is what it measures); WS is not supported (its processes are launched as commands).
"""

import argparse
import cProfile
import datetime
import io
import os
import pstats
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
WORKLOADS_DIR = BENCH_DIR / "workloads"
SYSTEMS = ("ours", "ours-before", "opengris", "dask")  # ours-before: SCALER_BENCH_BEFORE (see run.py)
PROFILED = ("W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "U1", "U2", "U3", "U4")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=PROFILED)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--system", default="ours", choices=SYSTEMS, help="profile an anchor the same way, to compare")
    parser.add_argument("--top", type=int, default=25, help="functions shown per profile")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def relaunch_in_venv(system: str) -> int:
    """Outer half: make sure the system's venv exists and imports, then run the inner half with its python."""
    sys.path.insert(0, str(BENCH_DIR))
    from harness.systems import WORKLOAD_MAIN, VenvError, ensure_venv

    try:
        python = ensure_venv(system, sys.executable)
    except VenvError as error:
        print(f"profile_ours: cannot build the `{system}` venv:\n{error}", file=sys.stderr)
        return 2
    check = subprocess.run([python, WORKLOAD_MAIN, "--system", system, "--check"], capture_output=True, text=True)
    if check.returncode != 0:
        tail = "\n".join(check.stderr.splitlines()[-8:])
        print(f"profile_ours: `{system}` is not runnable yet (the harness imports Client, SchedulerClusterCombo):")
        print(tail)
        return 2
    return subprocess.run([str(python), __file__, "--inner", *sys.argv[1:]]).returncode


class ThreadProfiles:
    """One cProfile.Profile per thread started after `arm()` (cProfile alone only sees the thread enabling it)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []

    def arm(self) -> None:
        def first_event(frame: Any, event: str, arg: Any) -> None:
            profile = cProfile.Profile()
            self.profiles.append(profile)
            sys.setprofile(None)
            profile.enable()

        threading.setprofile(first_event)

    def stats(self) -> pstats.Stats | None:
        threading.setprofile(None)
        if not self.profiles:
            return None
        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            stats.add(profile)
        return stats


def program(name: str, cmdline: list[str]) -> str:
    """What a process runs: its own name if it set one, else `python -m <module>`, else the script's name."""
    if name and not name.startswith("python"):
        return name
    if "-m" in cmdline[:-1]:
        return cmdline[cmdline.index("-m") + 1]
    if "-c" in cmdline[:-1]:
        return cmdline[cmdline.index("-c") + 1]  # multiprocessing: `from multiprocessing.spawn import ...`
    return Path(cmdline[1]).name if len(cmdline) > 1 else name


def guess_role(pid: int, snapshot: Any, client_pid: int, scheduler_pid: int | None) -> str:
    """By what the process runs, else by its place in the tree (OSS / scheduler / manager -> worker -> processor)."""
    if pid == client_pid:
        return "client"
    if pid == scheduler_pid:
        return "scheduler"
    _, name, cmdline = snapshot.info[pid]
    runs = program(name, cmdline)
    if "resource_tracker" in runs:
        return "multiprocessing resource tracker"
    for keyword, role in (
        ("storage", "object storage"),
        ("schedule", "scheduler"),
        ("manager", "worker manager"),
        ("zygote", "zygote"),
        ("process", "processor"),  # after "storage": scaler-processo(r), not multiprocessing
        ("worker", "worker"),
        ("host", "host"),
    ):
        if keyword in runs and "multiprocessing" not in runs:
            return role
    children = [p for p, (ppid, _, _) in snapshot.info.items() if ppid == pid]
    depth, parent = 0, pid
    while parent in snapshot.info and parent != client_pid:
        parent, depth = snapshot.info[parent][0], depth + 1
    if not children:
        return "object storage?" if depth == 1 else "processor?"
    return "worker manager?" if depth == 1 else "worker?"


def print_cpu(before: Any, after: Any, scheduler_pid: int | None, tasks: int | None) -> None:
    client_pid = os.getpid()
    per_role: dict[str, float] = {}
    print("\nCPU seconds (user + system) per process over the measured part:")
    for pid, cpu in sorted(after.cpu.items()):
        used = cpu - before.cpu.get(pid, 0.0)
        role = guess_role(pid, after, client_pid, scheduler_pid)
        per_role[role] = per_role.get(role, 0.0) + used
        _, name, cmdline = after.info[pid]
        print(f"  {used:8.3f}  {role:32} pid {pid:<7} {program(name, cmdline)[:80]}")
    print("\nper role" + (f" (and per task, {tasks} tasks)" if tasks else "") + ":")
    for role, used in sorted(per_role.items(), key=lambda item: -item[1]):
        per_task = f"   {1e3 * used / tasks:8.3f} ms/task" if tasks else ""
        print(f"  {used:8.3f} s  {role:32}{per_task}")
    total = sum(per_role.values())
    print(f"  {total:8.3f} s  {'total':32}" + (f"   {1e3 * total / tasks:8.3f} ms/task" if tasks else ""))


def print_stats(title: str, stats: pstats.Stats | None, top: int) -> None:
    print(f"\n===== {title} =====")
    if stats is None:
        print("  (no data)")
        return
    for order in ("cumulative", "tottime"):
        buffer = io.StringIO()
        stats.stream = buffer  # type: ignore[attr-defined]
        stats.sort_stats(order).print_stats(top)
        print(f"--- sorted by {order} ---")
        print("\n".join(line for line in buffer.getvalue().splitlines() if line.strip())[:20000])


def profile_inner(args: argparse.Namespace) -> int:
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(WORKLOADS_DIR), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(WORKLOADS_DIR))
    import procs
    import suite
    from adapters import make_adapter

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = BENCH_DIR / "results" / f"profile-{args.system}-{args.workload}-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = suite.WORKLOADS[args.workload]
    size = (suite.QUICK_SIZES if args.quick else suite.FULL_SIZES)[args.workload]
    adapter = make_adapter(args.system, out_dir)
    threads = ThreadProfiles()
    threads.arm()
    main_profile = cProfile.Profile()
    scheduler_pid: int | None = None
    try:
        if not spec.own_cluster:
            adapter.start(suite.N_WORKERS, separate_scheduler=spec.separate_scheduler)
            suite.wait_for_workers(adapter, suite.N_WORKERS)
            scheduler_pid = adapter.scheduler_process().pid
        before = procs.CpuSnapshot.take()
        main_profile.enable()
        metrics, info = spec.run(adapter, size)
        main_profile.disable()
        after = procs.CpuSnapshot.take()
        if spec.own_cluster:
            scheduler_pid = adapter.scheduler_process().pid
    finally:
        adapter.stop()
    print(f"{args.workload} ({args.system} {adapter.version()}): {metrics}  {info}")
    print_cpu(before, after, scheduler_pid, info.get("tasks") or info.get("calls"))
    main_profile.dump_stats(out_dir / "client-main-thread.prof")
    print_stats("client main thread, measured part", pstats.Stats(main_profile), args.top)
    print_stats("client background threads, from cluster start", threads.stats(), args.top)
    print(f"\nprofiles and cluster logs: {out_dir}")
    return 0


def main() -> int:
    args = parse_args()
    return profile_inner(args) if args.inner else relaunch_in_venv(args.system)


if __name__ == "__main__":
    sys.exit(main())
