"""Chaos (#16): tiny tasks, half `submit` and half `map`, while a random worker is SIGKILLed every 2 s and the
scheduler is SIGKILLed twice (`scaler FILE` starts it again). Every future must resolve with its value. Prints
the wall time against the same run without faults.

    .venv/bin/python benchmarks/chaos.py                 # 20,000 tasks
    .venv/bin/python benchmarks/chaos.py --tasks 2000    # a quick look
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from scaler import Client

BIN = Path(sys.executable).parent


def square(x: int) -> int:
    return x * x


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stack_file(folder: Path, workers: int) -> tuple[Path, str]:
    scheduler, storage = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    path = folder / "chaos.toml"
    path.write_text(
        f'[object_storage_server]\nbind_address = "{storage}"\n\n'
        f'[scheduler]\nbind_address = "{scheduler}"\nobject_storage_address = "{storage}"\n'
        # the work policy keeps the workers the work needs: a killed worker is replaced at once
        'policy_content = "allocate=even_load; scaling=work; cooldown_seconds=60"\n\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{scheduler}"\n'
        f'worker_manager_id = "pool"\nmax_task_concurrency = {workers}\n'
    )
    return path, scheduler


def processes_of(root: int, marker: str) -> list[psutil.Process]:
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if marker in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def run(tasks: int, workers: int, faults: bool, calm_seconds: float = 0.0) -> tuple[float, int, int]:
    """(seconds, workers killed, schedulers killed)"""
    with tempfile.TemporaryDirectory() as folder:
        path, address = stack_file(Path(folder), workers)
        log = open(Path(folder) / "stack.log", "wb")  # closed in the finally below
        stack = subprocess.Popen([str(BIN / "scaler"), str(path)], stdout=log, stderr=subprocess.STDOUT)
        stop = threading.Event()
        killed = {"workers": 0, "schedulers": 0}

        def chaos(started: float, expected_seconds: float) -> None:
            chance = random.Random(16)
            # the first kill a third into the calm run's time, the second once the first restart had time to settle
            scheduler_kills = [started + expected_seconds / 3, started + expected_seconds / 3 + 4.0]
            while not stop.wait(0.25):
                now = time.monotonic()
                if scheduler_kills and now >= scheduler_kills[0]:
                    scheduler_kills.pop(0)
                    for process in processes_of(stack.pid, "scaler.scheduler.process"):
                        process.kill()
                        killed["schedulers"] += 1
                if now >= started + 2 * (killed["workers"] + 1):
                    managers = processes_of(stack.pid, "worker_manager")
                    victims = managers[0].children() if managers else []  # worker agents, not their processors
                    if victims:
                        try:
                            chance.choice(victims).send_signal(signal.SIGKILL)
                            killed["workers"] += 1
                        except psutil.Error:
                            pass

        try:
            with Client(address, scheduler_lost_grace_seconds=60, connect_timeout_seconds=60) as client:
                client.map(square, range(workers * 4))  # the pool is up
                started = time.monotonic()
                watcher = threading.Thread(target=chaos, args=(started, calm_seconds), daemon=True)
                if faults:
                    watcher.start()
                half = tasks // 2
                submitted = [client.submit(square, x) for x in range(half)]
                mapped = client.map(square, range(half, tasks))
                values = [future.result(timeout=600) for future in submitted] + mapped
                seconds = time.monotonic() - started
                stop.set()
                assert values == [x * x for x in range(tasks)], "a future resolved with a wrong value"
        except BaseException:
            log.flush()
            print((Path(folder) / "stack.log").read_text()[-4000:], file=sys.stderr)
            raise
        finally:
            stop.set()
            stack.send_signal(signal.SIGTERM)
            try:
                stack.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stack.kill()
            log.close()
        return seconds, killed["workers"], killed["schedulers"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    calm, _, _ = run(args.tasks, args.workers, faults=False)
    print(f"without faults: {args.tasks:,} tasks in {calm:.2f} s", flush=True)
    stormy, workers_killed, schedulers_killed = run(args.tasks, args.workers, faults=True, calm_seconds=calm)
    print(
        f"with faults:    {args.tasks:,} tasks in {stormy:.2f} s ({workers_killed} worker(s) and "
        f"{schedulers_killed} scheduler(s) SIGKILLed; every future resolved with its value): "
        f"{stormy / calm:.1f}x the calm run"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
