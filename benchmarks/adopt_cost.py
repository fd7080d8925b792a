"""What a client's argument of a few hundred KB costs on the object storage server's host: the pipelined put of U3's
arguments (`object_storage/put_pipeline.py`: the client writes the object's file into the server's segment directory
and the server adopts it), CPU per argument of the client and of the server, and wall time, with the adopts sent one
request each and batched (`adoptMany`, client_core rule 10), alternated in one run:

    .venv/bin/python benchmarks/adopt_cost.py --objects 2000 --size 100000 --rounds 3

A real server process (`--insecure`, on a free local port). Each round puts `--objects` new objects of `--size`
random bytes through one `PutPipeline`, as a client's submit loop does (each put followed by a held item, released
once its put is acknowledged), and waits until every item is released. "one by one" sets the batch limit to 1 (the
code before adoptMany). Prints one line per mode and round; the client's CPU includes writing the files.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

import psutil

from scaler.io.address import free_tcp_address
from scaler.object_storage import client_core
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.put_pipeline import PutPipeline
from scaler.protocol.ids import ObjectID

OWNER = b"adopt-cost-benchmark"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=2000, help="objects put per round and mode")
    parser.add_argument("--size", type=int, default=100_000, help="bytes of each object (from 65536 on: a file)")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def one_round(address: str, local: object, payloads: list[bytes], batch: int) -> float:
    """Put every payload through a new pipeline; returns the wall seconds until the last item was released."""
    client_core.MAX_ADOPTS_PER_BATCH = batch
    released = threading.Event()
    count = [0]

    def release(items: list[int]) -> None:
        count[0] += len(items)
        if count[0] == len(payloads):
            released.set()

    def fail(items: list[int], error: BaseException) -> None:
        raise AssertionError(f"a put failed: {error}")

    pipeline: PutPipeline[int] = PutPipeline(address, OWNER, None, 60.0, release, fail, lambda _: None)
    try:
        began = time.perf_counter()
        for index, payload in enumerate(payloads):
            pipeline.put(ObjectID(os.urandom(16)), payload, "argument", local)  # type: ignore[arg-type]
            pipeline.submit([index])
        if not released.wait(120):
            raise AssertionError(f"only {count[0]} of {len(payloads)} items were released")
        return time.perf_counter() - began
    finally:
        pipeline.close()


def main() -> None:
    args = parse_args()
    address = free_tcp_address()
    command = [sys.executable, "-m", "scaler.entry_points.object_storage_server", address, "--insecure"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with ObjectStorageConnection(address, "client", owner_id=OWNER) as connection:
            local = connection.local_segments()
            if local is None:
                print("the server keeps no segment directory this process sees: nothing to measure")
                return
            watched, me = psutil.Process(server.pid), psutil.Process()
            print(f"load average {os.getloadavg()[0]:.1f}, {psutil.cpu_percent(1.0):.0f}% of the machine busy")
            for number in range(1, args.rounds + 1):
                for mode, batch in (("one by one", 1), ("adoptMany", 256)):
                    payloads = [os.urandom(args.size) for _ in range(args.objects)]
                    server_before, client_before = cpu_seconds(watched), cpu_seconds(me)
                    wall = one_round(address, local, payloads, batch)
                    count = len(payloads)
                    served = (cpu_seconds(watched) - server_before) / count * 1e6
                    client = (cpu_seconds(me) - client_before) / count * 1e6
                    print(
                        f"[{number}/{args.rounds}] {mode:10s} client CPU {client:6.1f} µs, server CPU {served:6.1f} µs,"
                        f" wall {wall / count * 1e6:7.1f} µs per argument of {args.size:,} bytes"
                    )
                    connection.delete_owner(OWNER)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
