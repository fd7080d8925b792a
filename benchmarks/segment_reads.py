"""What a read of an object from 64 KiB on costs on the object storage server's host, by route: CPU per read of the
reader and of the server, and wall time, for objects a client put (a shared-memory file it wrote and the server
adopted), read back with the connection a processor uses and with the one a client uses, alternated:

  * processor: maps the object's segment file by name, asking the server nothing (local_segments.py);
  * client: asks `getMapped` first (the server checks that the client owns the object), then maps the file.

    .venv/bin/python benchmarks/segment_reads.py --objects 1000 --size 100000 --rounds 3

A real server process (`--insecure`, on a free local port); each read is `get_frames` of one object, its frames then
dropped. Prints one line per route and round. See docs/performance.md ("Objects in shared memory").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import psutil

from scaler.io.address import free_tcp_address
from scaler.object_storage.connection import ObjectStorageConnection

OWNER = b"segment-reads-benchmark"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=1000, help="objects put, then each read once per round")
    parser.add_argument("--size", type=int, default=100_000, help="bytes of each object (from 65536 on: a file)")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def read_all(connection: ObjectStorageConnection, ids: list[bytes]) -> None:
    for object_id in ids:
        frames = connection.get_frames(object_id)
        del frames


def main() -> None:
    args = parse_args()
    address = free_tcp_address()
    command = [sys.executable, "-m", "scaler.entry_points.object_storage_server", address, "--insecure"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with (
            ObjectStorageConnection(address, "client", owner_id=OWNER) as client,
            ObjectStorageConnection(address, "processor") as processor,
        ):
            ids = [f"object-{index}".encode() for index in range(args.objects)]
            for object_id in ids:
                client.put(object_id, os.urandom(args.size), owner_id=OWNER)
            if processor.local_segments() is None:
                print("the server keeps no segment directory this process sees: nothing to measure")
                return
            watched = psutil.Process(server.pid)
            for number in range(1, args.rounds + 1):
                for route, connection in (("processor (by name)", processor), ("client (getMapped)", client)):
                    server_before, reader_before = cpu_seconds(watched), time.process_time()
                    wall_before = time.perf_counter()
                    read_all(connection, ids)
                    count = len(ids)
                    reader = (time.process_time() - reader_before) / count * 1e6
                    served = (cpu_seconds(watched) - server_before) / count * 1e6
                    wall = (time.perf_counter() - wall_before) / count * 1e6
                    print(
                        f"[{number}/{args.rounds}] {route:20s} reader CPU {reader:6.1f} µs,"
                        f" server CPU {served:6.1f} µs, wall {wall:7.1f} µs per read of {args.size:,} bytes"
                    )
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
