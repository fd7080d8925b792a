"""The object storage server under a memory budget (#32 item 3): put/get throughput in memory and spilled, and
its RSS against its budget while gigabytes pass through it.

    .venv/bin/python benchmarks/object_store.py [--sizes 1MB,100MB] [--volume 1GB] [--stream 5GB]
        [--stream-budget 1GiB] [--spill-parent /var/tmp] [--cold] [--save results.json]

Throughput: one real server process per case, one synchronous connection from this process (loopback TCP), as
many objects of each size as make `--volume`, put one after the other, then got in the same order.
- "in memory": no spill directory, a budget above the volume: the server's fast path, as before the budget;
- "spilled": a spill directory and a budget of a quarter of the volume (at least 2 objects): every put is
  written through before it is answered, and the gets read the objects back from their files, the oldest first,
  which is what was evicted (the page cache usually still holds them; `--cold` drops it before the gets, as root).
Each case runs `--repeat` times; the table shows the median.

RSS: a server with a spill directory and a budget of `--stream-budget` takes `--stream` bytes of objects of each
size (put, then got back once, then deleted, 20 objects behind), while a thread samples its RSS every 20 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from scaler.config.byte_size import format_byte_size, parse_byte_size
from scaler.io.address import free_tcp_address
from scaler.object_storage.connection import ObjectStorageConnection

MB = 1000**2


@dataclass
class Throughput:
    size: int
    mode: str
    objects: int
    put_mb_s: float
    get_mb_s: float


@dataclass
class Stream:
    size: int
    budget: int
    volume: int
    start_rss: int
    peak_rss: int
    end_rss: int
    seconds: float


@contextlib.contextmanager
def server(budget: int, spill: str | None) -> Iterator[tuple[str, psutil.Process]]:
    address = free_tcp_address()
    command = [sys.executable, "-m", "scaler.entry_points.object_storage_server", address, "-ll", "WARNING"]
    command += ["--max-memory", str(budget)] + (["--spill-directory", spill] if spill else [])
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        with ObjectStorageConnection(address, "scheduler", timeout_seconds=120) as probe:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(Exception):
                    probe.info()
                    break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the object storage server did not start")
                time.sleep(0.1)
        yield address, psutil.Process(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def drop_page_cache() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as file:
        file.write("1\n")


def throughput(size: int, mode: str, volume: int, parent: str, cold: bool) -> Throughput:
    count = max(2, volume // size)
    payload = os.urandom(size)
    spill = tempfile.mkdtemp(prefix="spill-", dir=parent) if mode == "spilled" else None
    budget = max(2 * size, volume // 4) if mode == "spilled" else 2 * count * size + (1 << 30)
    try:
        with server(budget, spill) as (address, _), ObjectStorageConnection(address, "client", owner_id=b"b") as conn:
            ids = [f"object-{index}".encode() for index in range(count)]
            began = time.perf_counter()
            for object_id in ids:
                conn.put(object_id, payload, owner_id=b"b")
            put_seconds = time.perf_counter() - began
            if cold:
                drop_page_cache()
            began = time.perf_counter()
            for object_id in ids:
                assert len(conn.get(object_id)) == size
            get_seconds = time.perf_counter() - began
    finally:
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
    total = count * size / MB
    shown = mode + (" (cold)" if cold and spill else "")
    return Throughput(size, shown, count, total / put_seconds, total / get_seconds)


def stream(size: int, budget: int, volume: int, parent: str) -> Stream:
    count = max(1, volume // size)
    payload = os.urandom(size)
    spill = tempfile.mkdtemp(prefix="spill-", dir=parent)
    samples: list[int] = []
    done = threading.Event()
    try:
        with server(budget, spill) as (address, process), ObjectStorageConnection(address, "scheduler") as conn:
            start_rss = process.memory_info().rss

            def sample() -> None:
                while not done.wait(0.02):
                    with contextlib.suppress(psutil.Error):
                        samples.append(process.memory_info().rss)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            began = time.perf_counter()
            for index in range(count):
                conn.put(b"%d" % index, payload)
                assert len(conn.get(b"%d" % index)) == size
                if index >= 20:
                    conn.delete([b"%d" % (index - 20)])
            seconds = time.perf_counter() - began
            done.set()
            sampler.join()
            end_rss = process.memory_info().rss
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    return Stream(size, budget, count * size, start_rss, max(samples, default=end_rss), end_rss, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1MB,100MB")
    parser.add_argument("--volume", default="1GB", help="bytes put per throughput case")
    parser.add_argument("--stream", default="5GB", help="bytes passed through for the RSS measurement")
    parser.add_argument("--stream-budget", default="1GiB")
    parser.add_argument("--spill-parent", default=tempfile.gettempdir(), help="where spill directories are made")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="also measure spilled gets after dropping the page cache")
    parser.add_argument("--save", help="write the figures as JSON")
    arguments = parser.parse_args()
    sizes = [parse_byte_size(size) for size in arguments.sizes.split(",")]
    volume, parent = parse_byte_size(arguments.volume), arguments.spill_parent
    print(f"load average before: {os.getloadavg()}")
    rows: list[Throughput] = []
    modes = ["in memory", "spilled"] + (["spilled cold"] if arguments.cold else [])
    for size in sizes:
        for mode in modes:
            runs = [
                throughput(size, mode.removesuffix(" cold"), volume, parent, mode.endswith("cold"))
                for _ in range(arguments.repeat)
            ]
            row = Throughput(
                size, runs[0].mode, runs[0].objects,
                statistics.median(run.put_mb_s for run in runs), statistics.median(run.get_mb_s for run in runs),
            )  # fmt: skip
            rows.append(row)
            print(f"{size / MB:>6g} MB  {row.mode:<16} x{row.objects:<5} put {row.put_mb_s:8.0f} MB/s  "
                  f"get {row.get_mb_s:8.0f} MB/s", flush=True)  # fmt: skip
    streams = [
        stream(size, parse_byte_size(arguments.stream_budget), parse_byte_size(arguments.stream), parent)
        for size in sizes
    ]
    print("\n| object size | case | objects | put | get |\n|---:|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row.size / MB:g} MB | {row.mode} | {row.objects} | {row.put_mb_s:,.0f} MB/s | "
              f"{row.get_mb_s:,.0f} MB/s |")  # fmt: skip
    print("\n| object size | passed through | budget | RSS at start | RSS peak | RSS at end | seconds |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for run in streams:
        print(f"| {run.size / MB:g} MB | {format_byte_size(run.volume)} | {format_byte_size(run.budget)} | "
              f"{format_byte_size(run.start_rss)} | {format_byte_size(run.peak_rss)} | "
              f"{format_byte_size(run.end_rss)} | {run.seconds:.1f} |")  # fmt: skip
    print(f"\nload average after: {os.getloadavg()}")
    if arguments.save:
        Path(arguments.save).write_text(json.dumps({"throughput": [asdict(r) for r in rows],
                                                    "stream": [asdict(s) for s in streams]}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
