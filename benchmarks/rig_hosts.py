"""Beyond one machine: the workloads of issue 74 on a rig of hosts (tests/rig: network namespaces on this machine,
each host its own /dev/shm and a shaped link), ours beside Ray and Dask, each started on the same hosts.

    .venv/bin/python benchmarks/rig_hosts.py                          # ours, ray, dask; 4 worker hosts x 2 slots
    .venv/bin/python benchmarks/rig_hosts.py --systems ours --workloads broadcast,gather --quick

`ours-before` is our own code at an earlier commit, started as ours is, when SCALER_BENCH_BEFORE names its source tree
(benchmarks/harness/systems.py), to measure a change before and after with the runs alternated (`--repeat`).

Hosts: `storage` (ours' storage and scheduler, Ray's 0-CPU head, Dask's scheduler), `client` (the client script), and
`w1`..`wN` (two task slots each). Every link is shaped to --rate-mbit each way. Workloads, each one client script
per system (benchmarks/rig/client_<system>.py), the systems alternated within each round, each on a fresh rig:

- broadcast: one 100 MB object read by every slot;
- shared: 200 tasks reading one 50 MB array;
- gather: 2N results of 10 MB gathered by the client;
- loop: the same results taken one by one by a loop (`result()`, Ray's `ray.get` of each);
- shuffle: N x N partitions of 10 MB made by tasks, then N tasks each reading one from every maker.

Per workload: the time (all of it, and from the object's publication on), every host's bytes sent and received, the
most any host sent (x the object, or x one result or partition), each worker host's memory held (its /dev/shm in use
plus its processes' anonymous memory, peak minus before; x the object), and what the links allow (`limit_seconds`):
one host's fetch of the object at the link rate; the client link carrying every result; every partition crossing at
the worker links' aggregate rate. Needs root. Writes benchmarks/results/rig-<time>.json and prints a table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]

from harness.systems import ensure_venv  # noqa: E402
from rig import systems  # noqa: E402

from tests.rig import MBIT, Rig, unavailable  # noqa: E402

MB = 1_000_000
SYSTEMS = ("ours", "ours-before", "ray", "dask")
WORKLOADS = ("broadcast", "shared", "gather", "loop", "shuffle")
CLIENTS = BENCH_DIR / "rig"
RUN_SECONDS = 900.0


def parameters(workload: str, hosts: int, slots: int, quick: bool) -> dict[str, Any]:
    """A workload's parameters; `slots` (every task slot of the rig) is what each client warms before it is timed: one
    task per slot, each holding its slot a moment, so that no workload times a slot's first task (its process's
    imports), whichever system runs it."""
    scale = 10 if quick else 1
    every = {"slots": hosts * slots}
    if workload == "broadcast":
        return {**every, "size": 100 * MB // scale, "tasks": hosts * slots, "hold_seconds": 0.5}
    if workload == "shared":
        return {**every, "size": 50 * MB // scale, "tasks": 200 // scale, "hold_seconds": 0.0}
    if workload in ("gather", "loop"):
        return {**every, "size": 10 * MB // scale, "tasks": 2 * hosts}
    return {**every, "size": 10 * MB // scale, "tasks": hosts * hosts + hosts, "hosts": hosts}


#: Before a workload, how long the worker hosts may take to give back what the one before held (ours' processors drop
#: a cached object unused for 30 s), and how close to their idle memory they must come.
SETTLE_SECONDS = 45.0
SETTLE_BYTES = 20 * MB


def idle_memory(rig: Rig, names: list[str]) -> dict[str, int]:
    return {name: rig.host(name).memory().total_bytes for name in names}


def settle(rig: Rig, idle: dict[str, int]) -> None:
    """Until every worker host holds about what it held idle (or SETTLE_SECONDS passed)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        now = idle_memory(rig, list(idle))
        if all(now[name] - idle[name] < SETTLE_BYTES for name in idle):
            return
        time.sleep(1.0)


class MemorySampler:
    """Each worker host's memory (/dev/shm in use + anonymous), sampled on a thread: the peak above its idle memory
    (measured once the system was up, before any workload)."""

    def __init__(self, rig: Rig, idle: dict[str, int], interval: float = 0.5) -> None:
        self._hosts = [rig.host(name) for name in idle]
        self._interval = interval
        self.before = dict(idle)
        self.peak = idle_memory(rig, list(idle))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            for host in self._hosts:
                self.peak[host.name] = max(self.peak[host.name], host.memory().total_bytes)

    def held(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return {name: self.peak[name] - self.before[name] for name in self.before}


def run_workload(rig: Rig, running: systems.Running, python: Path, workload: str, params: dict[str, Any],
                 idle: dict[str, int], rate_bits: int) -> dict[str, Any]:  # fmt: skip
    client = rig.host("client")
    params = {**params, "client_ip": client.address}
    settle(rig, idle)
    sampler = MemorySampler(rig, idle)
    before = rig.link_bytes()
    script = CLIENTS / f"client_{running.system.removesuffix('-before')}.py"
    done = client.run(str(python), str(script), running.address, workload,
                      json.dumps(params), timeout_seconds=RUN_SECONDS, env=running.client_env)  # fmt: skip
    after = rig.link_bytes()
    held = sampler.held()
    record: dict[str, Any] = {"system": running.system, "workload": workload, "params": params}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        record.update(status="failed", error=(done.stdout[-2000:] + done.stderr[-4000:]))
        return record
    outcome = json.loads(lines[-1])
    size = params["size"]
    sent = {name: after[name].sent - before[name].sent for name in after}
    received = {name: after[name].received - before[name].received for name in after}
    busiest = max(sent, key=lambda name: sent[name])
    record.update(
        status="ok" if outcome["right"] else "wrong answers",
        seconds=outcome["seconds"],
        task_seconds=outcome["task_seconds"],
        sent_bytes=sent,
        received_bytes=received,
        busiest_sender=busiest,
        busiest_sent_x=sent[busiest] / size,
        storage_sent_x=sent["storage"] / size,
        held_bytes=held,
        held_max_x=max(held.values()) / size,
        limit_seconds=limit_seconds(workload, params, rate_bits),
    )
    return record


def limit_seconds(workload: str, params: dict[str, Any], rate_bits: int) -> float:
    """What the links allow: one host's fetch of the object (broadcast, shared), the client link's carrying every
    result (gather, loop), every partition crossing at the worker links' aggregate rate (shuffle)."""
    size = params["size"]
    if workload in ("gather", "loop"):
        return params["tasks"] * size * 8 / rate_bits
    if workload == "shuffle":
        return params["hosts"] * size * 8 / rate_bits
    return size * 8 / rate_bits


def run_system(system: str, python: Path, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    worker_hosts = [f"w{index}" for index in range(1, args.worker_hosts + 1)]
    rate_bits = args.rate_mbit * MBIT
    records = []
    with Rig.open(["storage", "client", *worker_hosts], workdir, rate_bits=rate_bits) as rig:
        if args.storage_rate_mbit:
            rig.shape("storage", args.storage_rate_mbit * MBIT)
        started = time.monotonic()
        running = systems.start(system, rig, python.parent, worker_hosts, args.slots)
        print(f"[{system}] up on {len(rig.hosts)} hosts in {time.monotonic() - started:.0f} s", flush=True)
        idle = idle_memory(rig, worker_hosts)
        try:
            for workload in args.workloads:
                params = parameters(workload, args.worker_hosts, args.slots, args.quick)
                record = run_workload(rig, running, python, workload, params, idle, rate_bits)
                print(f"[{system}] {line(record)}", flush=True)
                records.append(record)
        finally:
            running.stop()
    return records


def line(record: dict[str, Any]) -> str:
    if record["status"] != "ok":
        return f"{record['workload']:9} {record['status'].upper()}: {record.get('error', '')[-600:]}"
    limit = record["limit_seconds"]
    return (
        f"{record['workload']:9} {record['seconds']:7.1f} s (from publication {record['task_seconds']:6.1f} s,"
        f" {record['task_seconds'] / limit:4.1f}x the limit)  most sent {record['busiest_sent_x']:4.1f}x"
        f" ({record['busiest_sender']})  storage host {record['storage_sent_x']:4.1f}x"
        f"  held per worker host {record['held_max_x']:4.1f}x"
    )


def table(records: list[dict[str, Any]], rate_mbit: int, hosts: int, slots: int) -> str:
    head = (
        f"{hosts} worker hosts x {slots} slots, a storage host, a client host; links {rate_mbit} Mbit/s each way\n"
        "| workload | system | time s | from publication s | limit s | x limit | most sent x (host) "
        "| storage host sent x | held per worker host x (max) |\n|---|---|---|---|---|---|---|---|---|"
    )
    rows = []
    for record in records:
        if record["status"] != "ok":
            rows.append(f"| {record['workload']} | {record['system']} | {record['status']} | | | | | | |")
            continue
        limit = record["limit_seconds"]
        held = f"{record['held_max_x']:.1f}" if record["workload"] in ("broadcast", "shared") else "-"
        rows.append(
            f"| {record['workload']} | {record['system']} | {record['seconds']:.1f} | {record['task_seconds']:.1f} "
            f"| {limit:.1f} | {record['task_seconds'] / limit:.1f} "
            f"| {record['busiest_sent_x']:.1f} ({record['busiest_sender']}) "
            f"| {record['storage_sent_x']:.1f} | {held} |"
        )
    return "\n".join([head, *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default="ours,ray,dask")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--worker-hosts", type=int, default=4)
    parser.add_argument("--slots", type=int, default=2, help="task slots per worker host")
    parser.add_argument("--rate-mbit", type=int, default=100, help="each link's rate, each way")
    parser.add_argument("--storage-rate-mbit", type=int, default=0, help="the storage host's link (0: --rate-mbit)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the systems alternate within each")
    parser.add_argument("--quick", action="store_true", help="sizes / 10, for a smoke run")
    parser.add_argument("--python", default=sys.executable, help="interpreter the venvs are built from")
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = parser.parse_args()
    args.systems = [name for name in args.systems.split(",") if name]
    args.workloads = [name for name in args.workloads.split(",") if name]
    for name in args.systems + args.workloads:
        if name not in SYSTEMS + WORKLOADS:
            parser.error(f"unknown system or workload {name!r}")
    why = unavailable()
    if why is not None:
        parser.error(why)
    pythons = {system: ensure_venv(system, args.python) for system in args.systems}
    # Keys of the run's own, as the test suite has (tests/conftest.py): ours' servers make theirs there, and the
    # workers and clients are given theirs from there; nothing of the run goes to the user's ~/.config/scaler.
    config_home = tempfile.mkdtemp(prefix="rig-bench-config-")
    os.environ["XDG_CONFIG_HOME"] = config_home
    try:
        return run(args, pythons)
    finally:
        shutil.rmtree(config_home, ignore_errors=True)


def run(args: argparse.Namespace, pythons: dict[str, Path]) -> int:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"rig-{stamp}.json"
    document: dict[str, Any] = {
        "started": stamp,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "load_average": {"start": os.getloadavg()},  # 1, 5 and 15 minutes: the machine may be shared
        "rig": {
            "worker_hosts": args.worker_hosts,
            "slots": args.slots,
            "rate_mbit": args.rate_mbit,
            "storage_rate_mbit": args.storage_rate_mbit or args.rate_mbit,
            "shaping": "tbf on both ends of each host's link",
            "quick": args.quick,
        },
        "runs": [],
    }
    for round_index in range(1, args.repeat + 1):
        for system in args.systems:
            workdir = Path(tempfile.mkdtemp(prefix=f"rig-bench-{system}-"))
            try:
                records = run_system(system, pythons[system], args, workdir)
            except Exception as error:  # a system that did not come up: said, and the others still run
                records = [{"system": system, "workload": "(start)", "status": "failed", "error": str(error)[-3000:]}]
                print(f"[{system}] FAILED: {str(error)[-1500:]}", flush=True)
            for record in records:
                record["round"] = round_index
            document["runs"] += records
            document["load_average"]["end"] = os.getloadavg()
            out.write_text(json.dumps(document, indent=1))
    print("\n" + table(document["runs"], args.rate_mbit, args.worker_hosts, args.slots))
    print(f"raw results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
