"""One copy per host (issue 74): what the storage server sends, and what each host holds, when every task slot of
several hosts reads one large object, with host caches (`--host-cache True`, the default) and without.

    sudo .venv/bin/python benchmarks/host_caches.py [--hosts 3] [--workers 2] [--size 100MB] [--tasks 24]

Each "host" is a mount and UTS namespace of this machine with its own tmpfs on /dev/shm (the storage server on one,
`--hosts` clusters of `--workers` workers on others; the scheduler and the client in this process's namespaces), as
tests/integration/test_host_caches.py makes them: links are loopback and not shaped, so this counts bytes, not time
(the rig of shaped links, tests/rig/, is where times are measured). Per mode it prints the bytes the storage server
sent on its connections (TCP bytes acknowledged, `ss`) while the tasks ran, in copies of the object, and the memory
each worker host's /dev/shm holds afterwards, in copies of the object. Needs root (mount namespaces).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scaler import Client
from scaler.config.byte_size import parse_byte_size
from scaler.io.address import free_tcp_port_block

BIN = Path(sys.executable).parent


def on_host(host: str, command: list[str], temporary: Path) -> list[str]:
    temporary.mkdir(exist_ok=True)
    script = f'mount -t tmpfs -o size=8g tmpfs /dev/shm && hostname {host} && exec "$0" "$@"'
    return ["env", f"TMPDIR={temporary}", "unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script,
            *command]  # fmt: skip


def storage_sent(port: int) -> int:
    listing = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    return sum(int(count) for count in re.findall(r"bytes_acked:(\d+)", listing))


def shm_used(pid: int) -> int:
    """Bytes used in the /dev/shm of the host whose process is `pid`."""
    shown = subprocess.run(["nsenter", f"--mount=/proc/{pid}/ns/mnt", "df", "-B1", "--output=used", "/dev/shm"],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    return int(shown.split()[-1])


def read_all(array: Any, pause: float) -> float:
    time.sleep(pause)  # the tasks overlap, so that every slot of every host takes some
    return float(array[::4096].sum())


def run(mode: bool, options: argparse.Namespace, work: Path) -> tuple[float, list[float]]:
    base = free_tcp_port_block(3)
    scheduler, storage = f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}"
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, command: list[str]) -> subprocess.Popen[bytes]:
        with open(work / f"{name}.log", "wb") as log:
            started.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
        return started[-1]

    try:
        start("storage", on_host("bench-storage", [str(BIN / "scaler_object_storage_server"), storage,
                                                   "--max-memory", "2GiB"], work / "storage-tmp"))  # fmt: skip
        start("scheduler", [str(BIN / "scaler_scheduler"), scheduler, "-osa", storage])
        hosts = [
            start(f"host-{n}", on_host(f"bench-host-{n}", [str(BIN / "scaler_cluster"), "-n", str(options.workers),
                  scheduler, "--host-cache", str(mode)], work / f"host-{n}-tmp"))
            for n in range(options.hosts)
        ]  # fmt: skip
        import numpy

        array = numpy.ones(options.size // 8, dtype=numpy.float64)
        with Client(scheduler, timeout_seconds=120, connect_timeout_seconds=120) as client:
            client.wait_for_workers(options.hosts * options.workers, timeout=300)
            reference = client.send_object(array)
            before = storage_sent(base + 1)
            client.map(read_all, [reference] * options.tasks, [0.5] * options.tasks)
            sent = storage_sent(base + 1) - before
            held = [shm_used(host.pid) / array.nbytes for host in hosts]
        return sent / array.nbytes, held
    finally:
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--size", default="100MB")
    parser.add_argument("--tasks", type=int, default=24)
    options = parser.parse_args()
    options.size = parse_byte_size(options.size)
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ss") is None:
        sys.exit("needs root, unshare and ss (each host is a mount namespace)")
    print(f"{options.hosts} hosts x {options.workers} workers, a {options.size / 1e6:.0f} MB object read by "
          f"{options.tasks} tasks")  # fmt: skip
    print("| host caches | storage server sent (copies) | each worker host's /dev/shm (copies) |")
    print("|---|---|---|")
    for mode in (False, True):
        with tempfile.TemporaryDirectory(prefix="host-caches-bench-") as work:
            sent, held = run(mode, options, Path(work))
        print(f"| {'on' if mode else 'off'} | {sent:.2f} | {', '.join(f'{h:.2f}' for h in held)} |")


if __name__ == "__main__":
    main()
