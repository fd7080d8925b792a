# PYTHON_ARGCOMPLETE_OK
"""`scaler_link LISTEN=TARGET [--ports 3] [--rtt-ms 40] [--jitter-ms 5] [--bandwidth 50Mbit] [--loss 0.01]`: a slow
link between this machine and a cluster, to rehearse one's own (scaler_rehearsal/fake_cloud/link.py)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from scaler.config.completion import offer_completion
from scaler.security.connection_files import mirror_connection, unregister_connection
from scaler.version import __version__
from scaler_rehearsal.fake_cloud.link import LinkRelay, LinkShape, Route, parse_bandwidth, parse_routes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(  # flags only as written in full (as SettingsParser)
        allow_abbrev=False,
        prog="scaler_link",
        description="A slow link in user space: relays TCP connections from LISTEN to TARGET with a round-trip delay, "
        "jitter, a bandwidth cap and packet loss (as the stalls it causes a TCP stream), so that a client on this "
        "machine meets its cluster as over a home or office link. Point the client at LISTEN, e.g. "
        "Client('tcp://127.0.0.1:9516', object_storage_address='tcp://127.0.0.1:9517').",
    )
    parser.add_argument(
        "routes", nargs="+", metavar="LISTEN=TARGET",
        help="e.g. tcp://127.0.0.1:9516=tcp://127.0.0.1:8516: connections to the first reach the second",
    )  # fmt: skip
    parser.add_argument(
        "--ports", type=int, default=3,
        help="consecutive ports relayed from each LISTEN to each TARGET (3: a scheduler, its object storage at port "
        "+ 1 and its monitor at port + 2; default 3)",
    )  # fmt: skip
    parser.add_argument("--rtt-ms", type=float, default=40.0, help="round trip added, in ms (default 40)")
    parser.add_argument(
        "--jitter-ms", type=float, default=0.0, help="spread of the delay, in ms (uniform, +- half of it; default 0)"
    )
    parser.add_argument(
        "--bandwidth", default="0",
        help="bandwidth each way, e.g. 50Mbit, 6MB/s, 10MiB/s (default 0: no cap)",
    )  # fmt: skip
    parser.add_argument(
        "--loss", type=float, default=0.0,
        help="probability that a TCP segment (1448 bytes) is lost; each loss stalls the stream one retransmission "
        "timeout (default 0)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=None, help="seed of the jitter and the losses (default: random)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    offer_completion(parser)
    arguments = parser.parse_args(argv)
    if arguments.ports < 1:
        parser.error("--ports must be at least 1")
    try:
        shape = LinkShape(
            arguments.rtt_ms / 1000, arguments.jitter_ms / 1000, parse_bandwidth(arguments.bandwidth), arguments.loss
        )
        routes = [route for text in arguments.routes for route in parse_routes(text, arguments.ports)]
    except ValueError as error:
        parser.error(str(error))
    return asyncio.run(_serve(routes, shape, arguments.seed))


async def _serve(routes: list[Route], shape: LinkShape, seed: int | None) -> int:
    relay = LinkRelay(routes, shape, seed)
    try:
        await relay.start()
    except OSError as error:
        print(f"scaler_link: cannot listen: {error}", file=sys.stderr)
        await relay.close()
        return 2
    # a local side finds the keys of what is behind the link (a cloud stack's) at the link's addresses too
    mirrored = [
        route.listen_address for route in routes if mirror_connection(route.listen_address, route.target_address)
    ]
    try:
        return await _until_stopped(relay, routes, shape)
    finally:
        unregister_connection(mirrored)


async def _until_stopped(relay: LinkRelay, routes: list[Route], shape: LinkShape) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    print(f"scaler_link: {shape.describe()}", flush=True)
    for route in routes:
        print(f"scaler_link: {route.describe()}", flush=True)
    await stop.wait()
    await relay.close()
    for route, (there, back) in relay.carried.items():
        print(f"scaler_link: {route.describe()}: {there:,} bytes there, {back:,} back", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
