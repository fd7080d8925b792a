"""`scaler_link`: a slow link between a laptop and its cluster, in user space, to rehearse one's own link before paying
for the cloud (docs/guide/bursting.md, "Working from a laptop"). No root and no `tc netem` needed: it is a TCP relay.

    client --> 127.0.0.1:9516 [scaler_link] --> 127.0.0.1:8516 scheduler (9517 -> 8517 storage, 9518 -> 8518 monitor)

Each relayed connection carries its bytes both ways through a `LinkDirection` per direction, which decides when
each chunk read from one side is written to the other:

- **bandwidth**: each direction of the link sends one chunk after the other at `bandwidth_bits` per second (a chunk
  of n bytes occupies it n * 8 / bandwidth seconds), whichever connection it belongs to: every connection across the
  link shares it, as they share a laptop's access link (`Bottleneck`);
- **delay**: once sent, a chunk arrives half the round trip later, plus jitter: a delay drawn uniformly within
  +-`jitter_seconds`/2 of that, never earlier than the chunk before it (one TCP stream is never reordered);
- **loss**: TCP hides a lost packet, so a loss is modelled by what it does to a stream: with probability `loss` per
  segment (`SEGMENT_BYTES`, a TCP MSS), the segment and everything behind it in its connection wait one
  retransmission timeout
  (`rto_seconds`: at least 200 ms, Linux's minimum, or the round trip plus four jitters). The window shrinking that
  follows a real loss is not modelled, so throughput under loss is somewhat better than on a real link.

The relay reads ahead at most a few bandwidth-delay products per direction (and at least `MIN_BUFFER_BYTES`), so
a sender is held back by the link as it would be by TCP's window, and the relay's memory stays bounded.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import random
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

SEGMENT_BYTES = 1448  #: a TCP segment's payload on an Ethernet path (MSS with timestamps)
MIN_RTO_SECONDS = 0.2  #: Linux's minimum retransmission timeout
MIN_BUFFER_BYTES = 1 << 20  #: what a direction reads ahead at least
READ_BYTES = 128 * 1024

_BANDWIDTH = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?)(bit|bps|b|byte|bytes)?(/s)?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BINARY = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bandwidth(text: str) -> float:
    """Bits per second of '50Mbit', '50 Mbit/s', '1Gbit', '6MB/s' (bytes), '10MiB/s'; '0' or 'none': no cap."""
    if text.strip().lower() in ("0", "none", "unlimited", ""):
        return 0.0
    found = _BANDWIDTH.match(text)
    if found is None:
        raise ValueError(
            f"bandwidth {text!r} is not understood: give a number and a unit, e.g. 50Mbit (bits per second), "
            "6MB/s (bytes) or 10MiB/s"
        )
    number, prefix, binary, unit, _ = found.groups()
    unit = (unit or "bit").lower()
    is_bytes = unit in ("byte", "bytes") or (unit == "b" and found.group(4) == "B")
    scale = (_BINARY if binary else _SCALE)[prefix.lower()]
    return float(number) * scale * (8 if is_bytes else 1)


@dataclass(frozen=True)
class LinkShape:
    """What the link does: round trip, jitter, bandwidth (0: no cap) and segment loss (a probability)."""

    rtt_seconds: float = 0.0
    jitter_seconds: float = 0.0
    bandwidth_bits: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        for name in ("rtt_seconds", "jitter_seconds", "bandwidth_bits"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if not (0 <= self.loss < 1):
            raise ValueError(f"loss must be a probability in [0, 1), not {self.loss!r}")

    @property
    def rto_seconds(self) -> float:
        return max(MIN_RTO_SECONDS, self.rtt_seconds + 4 * self.jitter_seconds)

    @property
    def buffer_bytes(self) -> int:
        """What a direction reads ahead: four bandwidth-delay products, at least MIN_BUFFER_BYTES."""
        if not self.bandwidth_bits:
            return MIN_BUFFER_BYTES * 8
        product = self.bandwidth_bits / 8 * max(self.rtt_seconds, 0.001)
        return max(MIN_BUFFER_BYTES, int(4 * product))

    def describe(self) -> str:
        bandwidth = f"{self.bandwidth_bits / 1e6:g} Mbit/s" if self.bandwidth_bits else "no bandwidth cap"
        return (
            f"round trip {self.rtt_seconds * 1000:g} ms +- {self.jitter_seconds * 1000 / 2:g} ms, {bandwidth}, "
            f"segment loss {self.loss:g} (a stall of {self.rto_seconds * 1000:.0f} ms each)"
        )


class Bottleneck:
    """The link's capacity one way, shared by every connection across it (a laptop's access link): it sends what it
    is given one chunk after the other."""

    def __init__(self) -> None:
        self.free_at = 0.0  #: when it has sent what it was given so far


class LinkDirection:
    """One direction of one connection: when each chunk arrives (pure but for its seeded random source). Its
    connection shares the direction's `Bottleneck` with the others; its own stream is never reordered, and a loss
    stalls it alone (head-of-line blocking in one TCP connection)."""

    def __init__(self, shape: LinkShape, rng: random.Random, bottleneck: Bottleneck | None = None) -> None:
        self.shape = shape
        self._rng = rng
        self._bottleneck = bottleneck if bottleneck is not None else Bottleneck()
        self._last_arrival = 0.0

    def arrival(self, size: int, now: float) -> float:
        """A chunk of `size` bytes handed to the link at `now` arrives at the returned time."""
        shape, bottleneck = self.shape, self._bottleneck
        sent = max(now, bottleneck.free_at)
        if shape.bandwidth_bits:
            sent += size * 8 / shape.bandwidth_bits
        bottleneck.free_at = sent
        delay = shape.rtt_seconds / 2
        if shape.jitter_seconds:
            delay += self._rng.uniform(-shape.jitter_seconds / 2, shape.jitter_seconds / 2)
        if shape.loss:
            delay += self._lost_segments(size) * shape.rto_seconds
        arrival = max(sent + max(0.0, delay), self._last_arrival)
        self._last_arrival = arrival
        return arrival

    def _lost_segments(self, size: int) -> int:
        segments = max(1, math.ceil(size / SEGMENT_BYTES))
        loss, draw = self.shape.loss, self._rng.random
        return sum(1 for _ in range(segments) if draw() < loss)


@dataclass(frozen=True)
class Route:
    listen_host: str
    listen_port: int
    target_host: str
    target_port: int

    @property
    def listen_address(self) -> str:
        return f"tcp://{self.listen_host}:{self.listen_port}"

    @property
    def target_address(self) -> str:
        return f"tcp://{self.target_host}:{self.target_port}"

    def describe(self) -> str:
        return f"{self.listen_host}:{self.listen_port} -> {self.target_host}:{self.target_port}"


def parse_routes(text: str, ports: int = 1) -> list[Route]:
    """`[tcp://]HOST:PORT=[tcp://]HOST:PORT` (listen=target), for `ports` consecutive ports from each (a scheduler,
    its object storage at port + 1 and its monitor at port + 2: 3)."""
    listen, separator, target = text.partition("=")
    if not separator:
        raise ValueError(f"a route is LISTEN=TARGET, e.g. tcp://127.0.0.1:9516=tcp://127.0.0.1:8516, not {text!r}")
    listen_host, listen_port = _host_port(listen)
    target_host, target_port = _host_port(target)
    return [Route(listen_host, listen_port + n, target_host, target_port + n) for n in range(ports)]


def _host_port(text: str) -> tuple[str, int]:
    address = text.strip().removeprefix("tcp://")
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit() or not host:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. tcp://127.0.0.1:8516)")
    return host.strip("[]"), int(port)


class LinkRelay:
    """Relays every route's connections through the link (asyncio). `start()` binds; `close()` ends everything."""

    def __init__(self, routes: Sequence[Route], shape: LinkShape, seed: int | None = None) -> None:
        self.routes = list(routes)
        self.shape = shape
        self._rng = random.Random(seed)
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self.connections = 0  #: connections relayed so far
        #: bytes carried per route, (towards the target, back from it)
        self.carried: dict[Route, list[int]] = {route: [0, 0] for route in self.routes}
        #: the link's capacity towards the targets and back, shared by every connection (one access link)
        self._up, self._down = Bottleneck(), Bottleneck()

    async def start(self) -> None:
        for route in self.routes:
            server = await asyncio.start_server(functools.partial(self._accepted, route=route), route.listen_host,
                                                route.listen_port)  # fmt: skip
            self._servers.append(server)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, route: Route) -> None:
        task = asyncio.ensure_future(self._relay(reader, writer, route))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _relay(self, inbound: asyncio.StreamReader, inbound_writer: asyncio.StreamWriter, route: Route) -> None:
        try:
            outbound, outbound_writer = await asyncio.open_connection(route.target_host, route.target_port)
        except OSError as error:
            logger.info("cannot reach %s:%d: %s", route.target_host, route.target_port, error)
            inbound_writer.close()
            return
        self.connections += 1
        for sink in (inbound_writer, outbound_writer):
            _no_delay(sink)
        seeds = (self._rng.getrandbits(64), self._rng.getrandbits(64))
        counts = self.carried[route]
        up_link = LinkDirection(self.shape, random.Random(seeds[0]), self._up)
        down_link = LinkDirection(self.shape, random.Random(seeds[1]), self._down)
        up = _Pipe(inbound, outbound_writer, up_link, self.shape, counts, 0)
        down = _Pipe(outbound, inbound_writer, down_link, self.shape, counts, 1)
        try:
            await asyncio.gather(up.run(), down.run())
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for sink in (inbound_writer, outbound_writer):
                sink.close()


class _Pipe:
    """One direction of a relayed connection: read as long as the link's buffer has room, write each chunk when the
    link delivers it."""

    def __init__(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        link: LinkDirection,
        shape: LinkShape,
        counts: list[int],
        index: int,
    ) -> None:
        self._source, self._sink, self._link = source, sink, link
        self._counts, self._index = counts, index
        self._limit = shape.buffer_bytes
        self._queued = 0
        self._chunks: deque[tuple[float, bytes]] = deque()
        self._arrived = asyncio.Event()  #: a chunk was queued (or the source ended)
        self._room = asyncio.Event()  #: the buffer has room again
        self._room.set()
        self._ended = False

    async def run(self) -> None:
        await asyncio.gather(self._read(), self._write())

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                await self._room.wait()
                data = await self._source.read(READ_BYTES)
                if not data:
                    break
                self._chunks.append((self._link.arrival(len(data), loop.time()), data))
                self._queued += len(data)
                self._counts[self._index] += len(data)
                if self._queued >= self._limit:
                    self._room.clear()
                self._arrived.set()
        finally:
            self._ended = True
            self._arrived.set()

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._chunks:
                if self._ended:
                    break
                self._arrived.clear()
                await self._arrived.wait()
                continue
            wait = self._chunks[0][0] - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            # every chunk due by now leaves in one write: a relay woken late (a busy machine) catches up at once
            now, due = loop.time(), []
            while self._chunks and self._chunks[0][0] <= now:
                due.append(self._chunks.popleft()[1])
            data = b"".join(due)
            self._sink.write(data)
            await self._sink.drain()
            self._queued -= len(data)
            if self._queued < self._limit:
                self._room.set()
        if self._sink.can_write_eof():
            self._sink.write_eof()


def _no_delay(writer: asyncio.StreamWriter) -> None:
    """Nagle off on the relay's own sockets: the link decides the timing, not the kernel's coalescing."""
    import socket

    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
