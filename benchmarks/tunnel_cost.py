"""The tunnels' cost: W1 (tiny tasks submitted one by one, then gathered) and W3 (sequential round trips of one
tiny task) on a 2-worker local cluster at a `tcp://`, a `tls://` and a `wss://` address, CURVE on in each (the
default: the user's keys), alternated, median of `--repeat`, and each tunnel's ratio to the native transport.
Certificates are made for the run (a CA and a certificate for 127.0.0.1, with `cryptography`, a test dependency).

    python benchmarks/tunnel_cost.py [--tasks 10000] [--round-trips 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scaler import Client, SchedulerClusterCombo
from scaler.io.address import free_tcp_port_block

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.tls_certificates import make_authority

SCHEMES = ("tcp", "tls", "wss")


def inc(value: int) -> int:
    return value + 1


def w1(client: Client, tasks: int) -> float:
    began = time.perf_counter()
    futures = [client.submit(inc, x) for x in range(tasks)]
    assert [future.result() for future in futures][-1] == tasks
    return tasks / (time.perf_counter() - began)


def w3(client: Client, round_trips: int) -> float:
    latencies = []
    for x in range(round_trips):
        began = time.perf_counter()
        client.submit(inc, x).result()
        latencies.append(time.perf_counter() - began)
    return statistics.median(latencies) * 1000


def measure(scheme: str, certificate: dict[str, str], arguments: argparse.Namespace) -> tuple[float, float]:
    address = f"{scheme}://127.0.0.1:{free_tcp_port_block(3)}"
    settings = certificate if scheme != "tcp" else {}
    with SchedulerClusterCombo(n_workers=2, address=address, **settings) as cluster:  # type: ignore[arg-type]
        with Client(cluster.get_address()) as client:
            w1(client, 1000)  # warm-up
            return w1(client, arguments.tasks), w3(client, arguments.round_trips)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        authority = make_authority(Path(folder))
        certificate = {"tls_cert": authority.good.cert, "tls_key": authority.good.key, "tls_ca": authority.ca}
        runs: dict[str, list[tuple[float, float]]] = {scheme: [] for scheme in SCHEMES}
        for _ in range(arguments.repeat):
            for scheme in SCHEMES:
                runs[scheme].append(measure(scheme, certificate, arguments))
    medians = {scheme: [statistics.median(values) for values in zip(*runs[scheme], strict=True)] for scheme in runs}
    native_w1, native_w3 = medians["tcp"]
    print(f"W1: {native_w1:,.0f} tasks/s over tcp:// (CURVE)")
    print(f"W3: p50 {native_w3:.2f} ms over tcp:// (CURVE)")
    for scheme in SCHEMES[1:]:
        tunnel_w1, tunnel_w3 = medians[scheme]
        print(f"{scheme}://: W1 {tunnel_w1:,.0f} tasks/s (native / tunnel {native_w1 / tunnel_w1:.2f}x), W3 p50 "
              f"{tunnel_w3:.2f} ms ({tunnel_w3 / native_w3:.2f}x)")  # fmt: skip
    for name, index in (("W1 tasks/s", 0), ("W3 p50 ms", 1)):
        for scheme in SCHEMES:
            print(f"  {name} {scheme} per round: {', '.join(f'{run[index]:.4g}' for run in runs[scheme])}")


if __name__ == "__main__":
    main()
