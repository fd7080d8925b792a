"""The tunnels' cost: W1 (tiny tasks submitted one by one, then gathered) and W3 (sequential round trips of one
tiny task) on a 2-worker local cluster at a `tcp://`, a `tls://` and a `wss://` address, CURVE on in each (the
default: the user's keys), every process of each cluster on its transport. The stacks run at once and the workloads
alternate between them in small slices, so that each transport meets the same load: W3 one round trip on each in
turn, W1 a batch of `--batch` tasks on each in turn. Medians, and each tunnel's ratio to the native transport.
Certificates are made for the run (a CA and a certificate for 127.0.0.1, with `cryptography`, a test dependency).

`--front`: the deployment the security guide describes instead (a laptop over the web, the cluster inside): each
tunnelled stack is a native cluster (`tcp://`, CURVE) that also serves its tunnel address (`tunnel_address`), its
workers on the native address, and only the client crosses the tunnel.

    python benchmarks/tunnel_cost.py [--round-trips 2000] [--batches 20] [--batch 500] [--schemes tcp,tls,wss] [--front]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scaler import Client, SchedulerClusterCombo
from scaler.io.address import free_tcp_port_block

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.tls_certificates import make_authority


def inc(value: int) -> int:
    return value + 1


def w1_batch(client: Client, tasks: int) -> float:
    began = time.perf_counter()
    futures = [client.submit(inc, x) for x in range(tasks)]
    assert [future.result() for future in futures][-1] == tasks
    return tasks / (time.perf_counter() - began)


def round_trip(client: Client, x: int) -> float:
    began = time.perf_counter()
    assert client.submit(inc, x).result() == x + 1
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round-trips", type=int, default=2000, help="W3 round trips on each transport")
    parser.add_argument("--batches", type=int, default=20, help="W1 batches on each transport")
    parser.add_argument("--batch", type=int, default=500, help="tasks in a W1 batch")
    parser.add_argument("--schemes", default="tcp,tls,wss", help="the first is the one the others are compared to")
    parser.add_argument("--front", action="store_true", help="only the client on the tunnel (workers native)")
    arguments = parser.parse_args()
    schemes = arguments.schemes.split(",")
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stacks:
        authority = make_authority(Path(folder))
        certificate = {"tls_cert": authority.good.cert, "tls_key": authority.good.key, "tls_ca": authority.ca}
        clients: dict[str, Client] = {}
        for scheme in schemes:
            address = f"{scheme}://127.0.0.1:{free_tcp_port_block(3)}"
            settings: dict[str, str] = certificate if scheme in ("tls", "wss") else {}
            if arguments.front and settings:
                settings = {**settings, "tunnel_address": address}
                address = f"tcp://127.0.0.1:{free_tcp_port_block(3)}"
            cluster = stacks.enter_context(SchedulerClusterCombo(n_workers=2, address=address, **settings))  # type: ignore[arg-type]
            reach = settings.get("tunnel_address", cluster.get_address())
            clients[scheme] = stacks.enter_context(Client(reach, tls_ca=certificate["tls_ca"]))
        for client in clients.values():
            w1_batch(client, 1000)  # warm-up
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        latencies: dict[str, list[float]] = {scheme: [] for scheme in schemes}
        for x in range(arguments.round_trips):
            for scheme in schemes:
                latencies[scheme].append(round_trip(clients[scheme], x))
        rates: dict[str, list[float]] = {scheme: [] for scheme in schemes}
        for _ in range(arguments.batches):
            for scheme in schemes:
                rates[scheme].append(w1_batch(clients[scheme], arguments.batch))
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    native = schemes[0]
    native_w1, native_w3 = statistics.median(rates[native]), statistics.median(latencies[native])
    for scheme in schemes:
        w1, w3 = statistics.median(rates[scheme]), statistics.median(latencies[scheme])
        quartiles = statistics.quantiles(latencies[scheme], n=4)
        spread = statistics.quantiles(rates[scheme], n=4)
        print(
            f"{scheme}://: W1 {w1:,.0f} tasks/s (native / tunnel {native_w1 / w1:.2f}x; quartiles {spread[0]:,.0f}-"
            f"{spread[2]:,.0f}), W3 p50 {w3 * 1000:.3f} ms ({w3 / native_w3:.2f}x; quartiles "
            f"{quartiles[0] * 1000:.3f}-{quartiles[2] * 1000:.3f} ms)"
        )


if __name__ == "__main__":
    main()
