"""A soak (#32 item 5): an hour of a cluster's life, compressed into `--minutes`, with every fault of #32 on a
schedule, and a report of what it cost and whether anything was lost.

    .venv/bin/python benchmarks/soak.py --minutes 60      # the hour
    .venv/bin/python benchmarks/soak.py --minutes 3       # a quick look

The cluster: an object storage server with a small budget and a spill directory (started here, so that it can be
restarted), and `scaler FILE` with a scheduler (worker timeout 10 s) and a native worker manager that replaces
dead workers. Clients come and go on `--clients` threads, each one connection after another: a map of small
tasks, a graph, and tasks whose argument is a 1 MB object. On a schedule (fractions of the run): a worker SIGKILLed
(at 15, 45 and 75 %), a worker frozen past the worker timeout then thawed (25 %), the storage restarted from its
spill directory (40 %), the scheduler SIGKILLed (60 %; `scaler FILE` starts it again).

The report: memory by process kind at the start (once the pool is up) and at the end: the largest USS of one process
of the kind (memory only it holds: what a leak grows) and the kind's summed PSS (shared pages divided among their
sharers; RSS would count the pages a worker's agent, zygote and processors share from the fork once in each); tasks
submitted, finished, failed (each reason with its count) and lost (submitted, never finished nor failed: must be 0).

Memory as a time series (soak_memory.py): every process of the stack is sampled every `--sample-seconds` (RSS, USS,
PSS, and the part of USS in mapped object-storage segment files), written as CSV to `--series` as the run goes, and
summarised per process and per kind: USS at the end of the warm-up (`--warm-up-minutes`, default the first 20 % of
the run), at the end, the largest, the slope after the warm-up in MiB per hour, and a flat / GROWING verdict (growth
after the warm-up within `--flat-mib`, or `--flat-share` of the warm-up value, whichever is larger).

    .venv/bin/python benchmarks/soak.py --minutes 60 --save soak.json    # series in soak.memory.csv
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from soak_memory import MemorySampler, stack_processes, storage_folders, verdicts
from soak_memory import report as memory_report

from scaler import Client
from scaler.config.byte_size import format_byte_size
from scaler.io.address import free_tcp_port_block

BIN = Path(sys.executable).parent
WORKER_TIMEOUT_SECONDS = 10


def square(x: int) -> int:
    return x * x


def add(a: int, b: int) -> int:
    return a + b


def length(data: bytes) -> int:
    return len(data)


class Tally:
    """What happened to every task the clients submitted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.submitted = self.finished = 0
        self.failed: collections.Counter[str] = collections.Counter()
        self.client_errors: collections.Counter[str] = collections.Counter()  #: outside any task (a connection)

    def run(self, count: int, work: Callable[[], None]) -> None:
        with self.lock:
            self.submitted += count
        try:
            work()
        except Exception as error:  # every failure is counted with its reason, none is lost
            reason = f"{type(error).__name__}: {str(error).splitlines()[0][:100] if str(error) else ''}"
            with self.lock:
                (self.failed if count else self.client_errors)[reason] += max(count, 1)
            return
        with self.lock:
            self.finished += count


def one_client(address: str, tally: Tally, round_number: int) -> None:
    with Client(address, scheduler_lost_grace_seconds=60, connect_timeout_seconds=60) as client:
        values = list(range(200))

        def mapped() -> None:
            assert client.map(square, values) == [x * x for x in values], "a map returned a wrong value"

        def graph() -> None:
            tasks = {
                "a": round_number,
                "b": 1,
                **{f"n{i}": (add, "a" if i == 0 else f"n{i - 1}", "b") for i in range(20)},
            }
            assert client.get(tasks, keys=["n19"])["n19"] == round_number + 20, "a graph returned a wrong value"

        def objects() -> None:
            reference = client.send_object(os.urandom(1_000_000))
            futures = [client.submit(length, reference) for _ in range(5)]
            assert [f.result(timeout=300) for f in futures] == [1_000_000] * 5, "a task returned a wrong value"

        tally.run(len(values), mapped)
        tally.run(20, graph)
        tally.run(5, objects)


def clients(address: str, tally: Tally, stop: threading.Event) -> None:
    round_number = 0
    while not stop.is_set():
        round_number += 1
        tally.run(0, functools.partial(one_client, address, tally, round_number))  # a connection that failed counts too


def descendants(root: int, marker: str) -> list[psutil.Process]:
    found = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(root).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if marker in " ".join(child.cmdline()):
                    found.append(child)
    return found


def worker_agents(stack: int) -> tuple[psutil.Process | None, list[psutil.Process]]:
    """The native manager's forker (the process the workers are forked from) and the worker agents it forked."""
    managers = descendants(stack, "scaler.worker_manager.process")
    forkers = managers[0].children() if managers else []
    with contextlib.suppress(psutil.Error):
        return (forkers[0], forkers[0].children()) if forkers else (None, [])
    return None, []


def memory(stack: int, storage: int) -> dict[str, dict[str, int]]:
    """Memory by process kind: how many, the largest USS (what one process alone holds: its growth is a leak's) and
    the summed PSS (shared pages divided among the processes sharing them, so that sums add up)."""
    forker, agents = worker_agents(stack)
    kinds: dict[str, list[psutil.Process]] = {
        "object storage": [psutil.Process(storage)],
        "scheduler": descendants(stack, "scaler.scheduler.process"),
        "worker manager": descendants(stack, "scaler.worker_manager.process"),
        "worker forker": [forker] if forker else [],
        "soak (clients)": [psutil.Process()],
        "worker agent": agents,
        "worker zygote": [],
        "worker processor": [],
    }
    for agent in agents:
        with contextlib.suppress(psutil.Error):
            for zygote in agent.children():
                kinds["worker zygote"].append(zygote)
                kinds["worker processor"].extend(zygote.children())
    found: dict[str, dict[str, int]] = {}
    for kind, processes in kinds.items():
        infos = []
        for process in processes:
            with contextlib.suppress(psutil.Error):
                infos.append(process.memory_full_info())
        if infos:
            found[kind] = {"count": len(infos), "max_uss": max(i.uss for i in infos), "pss": sum(i.pss for i in infos)}
    return found


def start_storage(address: str, spill: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as output:
        command = [str(BIN / "scaler_object_storage_server"), address, "--max-memory", "256MiB"]
        return subprocess.Popen([*command, "--spill-directory", str(spill)], stdout=output, stderr=output)


def soak(
    minutes: float, workers: int, client_threads: int, folder: Path, series: Path, sample_seconds: float
) -> dict[str, Any]:
    base = free_tcp_port_block(3)
    scheduler, storage_address = f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}"
    stack_file = folder / "soak.toml"
    stack_file.write_text(
        f'[scheduler]\nbind_address = "{scheduler}"\nobject_storage_address = "{storage_address}"\n'
        f"worker_timeout_seconds = {WORKER_TIMEOUT_SECONDS}\n"
        'policy_content = "allocate=even_load; scaling=work; cooldown_seconds=60"\n\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{scheduler}"\n'
        f'worker_manager_id = "pool"\nmax_task_concurrency = {workers}\n'
    )
    spill, log = folder / "spill", folder / "soak.log"
    spill.mkdir()
    storage = start_storage(storage_address, spill, log)
    with open(log, "ab") as output:
        stack = subprocess.Popen([str(BIN / "scaler"), str(stack_file)], stdout=output, stderr=output)
    tally, stop, events = Tally(), threading.Event(), []
    current_storage = [storage]  #: the sampler's view of the storage server (a new process after its restart)
    sampler = MemorySampler(
        series,
        sample_seconds,
        lambda: stack_processes(stack.pid, current_storage[0].pid),
        lambda: storage_folders(current_storage[0].pid, spill),
    )
    try:
        with Client(scheduler, connect_timeout_seconds=60) as warm:
            warm.map(square, range(workers * 4))  # the pool is up
        start_memory = memory(stack.pid, storage.pid)
        started = time.monotonic()
        sampler.start()
        threads = [threading.Thread(target=clients, args=(scheduler, tally, stop)) for _ in range(client_threads)]
        for thread in threads:
            thread.start()
        schedule = sorted([(0.15, "kill a worker"), (0.25, "freeze a worker"), (0.40, "restart the storage"),
                           (0.45, "kill a worker"), (0.60, "kill the scheduler"), (0.75, "kill a worker")])  # fmt: skip
        duration = minutes * 60
        for fraction, fault in schedule:
            time.sleep(max(0.0, started + fraction * duration - time.monotonic()))
            events.append(f"{time.monotonic() - started:7.1f} s  {fault}")
            print(events[-1], flush=True)
            storage = inject(fault, stack.pid, storage, storage_address, spill, log)
            current_storage[0] = storage
        time.sleep(max(0.0, started + duration - time.monotonic()))
        stop.set()
        for thread in threads:
            thread.join(timeout=600)
        end_memory = memory(stack.pid, storage.pid)
        sampler.stop()
    finally:
        stop.set()
        for process in (stack, storage):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
    lost = tally.submitted - tally.finished - sum(tally.failed.values())
    return {"minutes": minutes, "events": events, "start_memory": start_memory, "end_memory": end_memory,
            "submitted": tally.submitted, "finished": tally.finished, "failed": dict(tally.failed), "lost": lost,
            "client_errors": dict(tally.client_errors), "samples": sampler.samples}  # fmt: skip


def inject(
    fault: str, stack: int, storage: subprocess.Popen[bytes], address: str, spill: Path, log: Path
) -> subprocess.Popen[bytes]:
    """Carry out one fault; returns the storage server's process (a new one after a restart)."""
    _, agents = worker_agents(stack)
    if fault == "kill a worker" and agents:
        agents[0].kill()
    elif fault == "freeze a worker" and agents:
        frozen = [agents[-1], *agents[-1].children(recursive=True)]
        for process in frozen:
            process.suspend()
        time.sleep(WORKER_TIMEOUT_SECONDS + 5)  # past the worker timeout: the scenario, not a synchronisation
        for process in frozen:
            with contextlib.suppress(psutil.Error):
                process.resume()
    elif fault == "restart the storage":
        storage.send_signal(signal.SIGTERM)
        storage.wait(timeout=60)
        return start_storage(address, spill, log)
    elif fault == "kill the scheduler":
        for process in descendants(stack, "scaler.scheduler.process"):
            process.kill()
    return storage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--clients", type=int, default=2, help="client threads, each one connection after another")
    parser.add_argument("--save", help="write the report as JSON")
    parser.add_argument("--series", help="the memory series as CSV (default: next to --save, else soak.memory.csv)")
    parser.add_argument("--sample-seconds", type=float, default=30.0, help="how often every process is sampled")
    parser.add_argument("--warm-up-minutes", type=float, help="the warm-up (default: the first 20 %% of the run)")
    parser.add_argument("--flat-mib", type=float, default=10.0, help="growth after the warm-up still called flat")
    parser.add_argument("--flat-share", type=float, default=0.1, help="... or this share of the warm-up value")
    arguments = parser.parse_args()
    series = Path(
        arguments.series or (Path(arguments.save).with_suffix(".memory.csv") if arguments.save else "soak.memory.csv")
    )
    warm_up_minutes = arguments.warm_up_minutes if arguments.warm_up_minutes is not None else arguments.minutes * 0.2
    folder = Path(tempfile.mkdtemp(prefix="soak-"))
    try:
        report = soak(arguments.minutes, arguments.workers, arguments.clients, folder, series.absolute(),
                      arguments.sample_seconds)  # fmt: skip
    except BaseException:
        print((folder / "soak.log").read_text(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{report['minutes']:g} minutes; load average {os.getloadavg()}")
    print("\n| processes | count at start / end | largest USS at start | at end | summed PSS at start | at end |")
    print("|---|---:|---:|---:|---:|---:|")
    start, end = report["start_memory"], report["end_memory"]
    for name in sorted(set(start) | set(end)):
        sides = [side.get(name, {}) for side in (start, end)]
        count = " / ".join(str(side.get("count", 0)) for side in sides)
        uss = [format_byte_size(side["max_uss"]) if side else "-" for side in sides]
        pss = [format_byte_size(side["pss"]) if side else "-" for side in sides]
        print(f"| {name} | {count} | {uss[0]} | {uss[1]} | {pss[0]} | {pss[1]} |")
    print(f"\ntasks submitted {report['submitted']}, finished {report['finished']}, lost {report['lost']}")
    for reason, count in sorted(report["failed"].items()):
        print(f"  failed {count}: {reason}")
    for reason, count in sorted(report["client_errors"].items()):
        print(f"  a client's connection failed {count} time(s): {reason}")
    kinds, processes = verdicts(report.pop("samples"), warm_up_minutes * 60, arguments.flat_mib, arguments.flat_share)
    print(
        f"\nUSS every {arguments.sample_seconds:g} s (series in {series}); warm-up {warm_up_minutes:g} minutes; flat: "
        f"grows by at most {arguments.flat_mib:g} MiB or {arguments.flat_share:.0%} after the warm-up\n"
    )
    print(memory_report(kinds, processes))
    report["memory_verdicts"] = {v.name: dataclasses.asdict(v) for v in kinds + processes}
    report["series"] = str(series)
    if arguments.save:
        Path(arguments.save).write_text(json.dumps(report, indent=1))
    if report["lost"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
