"""What a ZeroMQ part costs: a batch of small messages sent as one part per message, against the same batch joined in
one part (what protocol version 3's senders do, `scaler.io.zmq_parts.joined`), over a DEALER/ROUTER pair on
127.0.0.1, with CURVE and without. CPU of this process (both sockets and their I/O thread) per message.

    python benchmarks/part_cost.py [--batches 200] [--batch 50] [--size 300]

Not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import zmq

from scaler.io.address import free_tcp_port_block
from scaler.io.zmq_parts import joined
from scaler.protocol import codec
from scaler.protocol import messages as m


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pair(context: zmq.Context[zmq.Socket[bytes]], curve: bool) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
    router, dealer = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
    if curve:
        server_public, server_secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        router.curve_secretkey, router.curve_publickey, router.curve_server = server_secret, server_public, True
        dealer.curve_secretkey, dealer.curve_publickey = client_secret, client_public
        dealer.curve_serverkey = server_public
    address = f"tcp://127.0.0.1:{free_tcp_port_block(1)}"
    router.bind(address)
    dealer.connect(address)
    dealer.send(b"hello")
    router.recv_multipart()
    return router, dealer


def measure(curve: bool, join: bool, batches: int, batch: list[bytes]) -> tuple[float, float]:
    """CPU and wall microseconds per message."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router, dealer = _pair(context, curve)
    try:
        started_cpu, started = _cpu_seconds(), time.perf_counter()
        for _ in range(batches):
            dealer.send_multipart(joined(batch) if join else batch)
            frames = router.recv_multipart(copy=False)
            messages = [part for frame in frames[1:] for part in codec.split(frame.bytes)]
            assert len(messages) == len(batch)
        count = batches * len(batch)
        return (_cpu_seconds() - started_cpu) / count * 1e6, (time.perf_counter() - started) / count * 1e6
    finally:
        router.close(0)
        dealer.close(0)
        context.term()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50, help="messages per batch")
    parser.add_argument("--size", type=int, default=300, help="about how many bytes each message has")
    arguments = parser.parse_args()
    message = codec.encode(m.TaskLog(os.urandom(16), m.LogStream.STDOUT, "x" * max(0, arguments.size - 64)))
    batch = [message] * arguments.batch
    print(f"{arguments.batch} messages of {len(message)} bytes per batch, {arguments.batches} batches, alternated")
    for _round in range(2):
        for curve in (True, False):
            for join in (False, True):
                cpu, wall = measure(curve, join, arguments.batches, batch)
                label = f"{'curve' if curve else 'plain'}, {'one part per batch' if join else 'a part per message'}"
                print(f"  {label:<36} CPU {cpu:5.2f} us per message, wall {wall:5.2f} us")


if __name__ == "__main__":
    main()
