"""The two ends of a tunnelled connection on the relay's loop: `Link` is one connection (the public one, framed as
TLS records or WebSocket messages; the private one to ZeroMQ, raw), which first answers a handshake (reads of HTTP
heads) and is then joined to its partner: what one reads, the other writes, with flow control both ways, and the
end of either ends the other."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Protocol, cast

#: TCP keep-alive on public connections: an idle peer is probed after this long (ZeroMQ's own sockets use the same).
KEEPALIVE_IDLE_SECONDS = 30


class Framing(Protocol):
    """How a public connection carries ZeroMQ bytes (WebSocket messages; TLS alone needs none)."""

    closed: bool

    def wrap(self, payload: bytes) -> bytes: ...

    def unwrap(self, data: bytes) -> tuple[bytes, bytes]: ...

    def close(self) -> bytes: ...


class HandshakeEnded(ConnectionError):
    """The connection ended, or sent too much or nothing in time, before its handshake was done."""


class Link(asyncio.Protocol):
    """One connection of a tunnel. Before `join`, what it reads is kept for `read_head`; after, it goes to the
    partner (unframed when this link has a framing). `closed` is done when the connection is gone."""

    def __init__(self, on_made: Callable[[Link], None] | None = None) -> None:
        """`on_made(link)`: called once the connection is made (after its TLS handshake, on a TLS server)."""
        self._on_made = on_made
        self.transport: asyncio.Transport | None = None
        self.framing: Framing | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._partner: Link | None = None
        self._kept = bytearray()
        self._arrived: asyncio.Event = asyncio.Event()

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if self._on_made is not None:
            self._on_made(self)

    def data_received(self, data: bytes) -> None:
        if self._partner is None:
            self._kept += data
            self._arrived.set()
            return
        self._pass_on(data)

    def eof_received(self) -> bool | None:
        return False  # the transport closes: a tunnel never half-closes

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self._arrived.set()
        if self._partner is not None:
            self._partner.close()

    def pause_writing(self) -> None:
        if self._partner is not None and self._partner.transport is not None:
            self._partner.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._partner is not None and self._partner.transport is not None:
            self._partner.transport.resume_reading()

    # ------------------------------------------------------------ the handshake

    async def read_head(self, limit: int, timeout_seconds: float) -> bytes:
        """The bytes up to and with the first blank line (an HTTP head); what follows stays kept. HandshakeEnded when
        the connection ends first, the head is longer than `limit`, or it takes longer than the timeout."""
        try:
            return await asyncio.wait_for(self._head(limit), timeout_seconds)
        except asyncio.TimeoutError:
            raise HandshakeEnded(f"no complete HTTP head within {timeout_seconds:g} s") from None

    async def _head(self, limit: int) -> bytes:
        while True:
            end = self._kept.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self._kept[: end + 4])
                del self._kept[: end + 4]
                return head
            if len(self._kept) > limit:
                raise HandshakeEnded(f"an HTTP head longer than {limit} bytes")
            if self.closed.done():
                raise HandshakeEnded("the connection closed")
            self._arrived.clear()
            await self._arrived.wait()

    def take_kept(self) -> bytes:
        kept = bytes(self._kept)
        self._kept.clear()
        return kept

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    # ------------------------------------------------------------ joined

    def join(self, partner: Link, payload: bytes = b"") -> None:
        """From now on, what this link reads goes to `partner` and back; `payload` (ZeroMQ bytes this link already
        unframed) goes first, then what it kept."""
        self._partner, partner._partner = partner, self
        for link in (self, partner):
            if link.closed.done():  # ended while the other was being opened
                self.close()
                partner.close()
                return
        if payload:
            partner.carry(payload)
        for link in (self, partner):
            kept = link.take_kept()
            if kept:
                link._pass_on(kept)

    def carry(self, payload: bytes) -> None:
        """Write ZeroMQ bytes to this connection (framed, when it has a framing)."""
        data = self.framing.wrap(payload) if self.framing is not None else payload
        if data:
            self.write(data)

    def _pass_on(self, data: bytes) -> None:
        assert self._partner is not None
        if self.framing is None:
            self._partner.carry(data)
            return
        payload, answer = self.framing.unwrap(data)
        if answer:
            self.write(answer)
        if payload:
            self._partner.carry(payload)
        if self.framing.closed:
            self.close()

    def close(self) -> None:
        """End the connection once what is buffered is written (a WebSocket says goodbye first); the partner follows."""
        if self.transport is None or self.transport.is_closing():
            if self.transport is None and not self.closed.done():
                self.closed.set_result(None)
            return
        if self.framing is not None:
            goodbye = self.framing.close()
            if goodbye:
                self.transport.write(goodbye)
        self.transport.close()


def tune(transport: asyncio.BaseTransport) -> None:
    """No Nagle delay (ZeroMQ's own TCP sockets set none either) and keep-alive probes on a public connection."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECONDS)
    except OSError:
        pass
