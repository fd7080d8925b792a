"""One connection of a tunnel on the relay's loop: a non-blocking socket (TCP or a unix socket), with TLS done by
OpenSSL in memory (`ssl.SSLObject` over two `MemoryBIO`s: one read of the socket feeds every record it brought,
and one write sends every record made, where an `SSLSocket` reads each record's header and body apart). Its
handshakes await readiness (`connect`, `start_tls`, `recv_some`, `send_all`, `read_head`); once joined
(`pump.Joint`), the loop's reader and writer callbacks call `read_into`, `write` and `flush`, which never block.

Every stream of a relay is in its `Streams` set until closed, so that a forked child can close the connections it
inherited (`Streams.close_inherited`): a connection open in two processes does not end when one of them closes it."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Iterator

#: TCP keep-alive on public connections: an idle peer is probed after this long (ZeroMQ's own sockets use the same).
KEEPALIVE_IDLE_SECONDS = 30
#: What one read takes during a handshake.
HANDSHAKE_READ_BYTES = 64 * 1024
#: `read_into`'s answer when nothing is there to read yet.
WOULD_BLOCK = -1
#: Room a TLS read leaves in its buffer for a record begun by the read before (16 KiB of data and its overhead), so
#: that the plaintext of every whole record fits and none waits unseen in memory.
TLS_RECORD_ROOM = 20 * 1024
#: How long a listening socket that could not accept (no descriptor left) rests before it accepts again.
ACCEPT_RETRY_SECONDS = 1.0
#: What a stream waiting to be joined keeps of what its peer sends before it stops reading (a ZMTP greeting is 64).
WAITING_KEEP_BYTES = 64 * 1024

_AGAIN = (BlockingIOError, InterruptedError)

logger = logging.getLogger("scaler.io.tunnel")


class HandshakeEnded(ConnectionError):
    """The connection ended, or sent too much or nothing in time, before its handshake was done."""


class Streams:
    """The open streams of one relay."""

    def __init__(self) -> None:
        self._open: set[Stream] = set()

    def add(self, stream: Stream) -> None:
        self._open.add(stream)

    def discard(self, stream: Stream) -> None:
        self._open.discard(stream)

    def __iter__(self) -> Iterator[Stream]:
        return iter(list(self._open))

    def __len__(self) -> int:
        return len(self._open)

    def close_inherited(self) -> None:
        """In a forked child: close every stream's socket here, without a word to its peer (the parent's
        connections go on in the parent) and without the loop, which has no thread in the child."""
        for stream in list(self._open):
            stream.sock.close()
        self._open.clear()


class _Tls:
    """TLS in memory: records in from `feed`, plaintext out of `read_into`; plaintext in to `seal`, records out."""

    def __init__(self, context: ssl.SSLContext, server_side: bool, server_hostname: str | None) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.session = context.wrap_bio(self.incoming, self.outgoing, server_side, server_hostname)

    def read_into(self, buffer: memoryview) -> tuple[int, bool]:
        """(plaintext of every whole record fed, into `buffer`; whether the peer said close_notify)."""
        total, size = 0, len(buffer)
        while total < size and (self.incoming.pending or self.session.pending()):  # nothing fed: no read to fail
            try:
                count = self._read(size - total, buffer[total:])
            except ssl.SSLWantReadError:
                return total, False
            except ssl.SSLZeroReturnError:
                return total, True
            if count == 0:
                return total, True
            total += count
        return total, False

    def _read(self, size: int, into: memoryview) -> int:
        """`SSLObject.read` into a buffer, which answers the count (typeshed has its bytes answer only)."""
        read: Callable[[int, memoryview], int] = self.session.read  # type: ignore[assignment]
        return read(size, into)

    def seal(self, data: bytes | bytearray | memoryview) -> bytes:
        """The records carrying `data`, and whatever else TLS has to say (a key update's answer)."""
        if data:
            self.session.write(data)
        return self.outgoing.read()


class Stream:
    """A connected non-blocking socket on `loop`; `kept` holds plaintext a handshake read past what it needed."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, streams: Streams) -> None:
        sock.setblocking(False)
        self.sock: socket.socket = sock
        self.loop = loop
        self.kept = bytearray()
        self.closed = False
        #: the peer ended the connection after the bytes the last `read_into` returned
        self.at_end = False
        #: bytes (TLS records, when it has TLS) the socket did not take yet: `flush` when writable
        self.unsent = bytearray()
        self._tls: _Tls | None = None
        self._streams = streams
        streams.add(self)

    @property
    def is_tls(self) -> bool:
        return self._tls is not None

    def fileno(self) -> int:
        return self.sock.fileno()

    # ------------------------------------------------------------ handshakes (awaited)

    async def connect(self, address: tuple[object, ...] | str) -> None:
        await self.loop.sock_connect(self.sock, address)

    async def start_tls(self, context: ssl.SSLContext, server_side: bool, server_hostname: str | None) -> None:
        """The TLS handshake, as a server or as a client checking `server_hostname`; ssl.SSLError (its subclass
        SSLCertVerificationError for a certificate; SSLEOFError when the peer closed) or OSError when it fails. TLS is
        the first thing on a connection (after a proxy's answer, which is read to its end): nothing may be kept."""
        if self.kept:
            raise HandshakeEnded("bytes arrived before the TLS handshake")
        tls = _Tls(context, server_side, server_hostname)
        while True:
            try:
                tls.session.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._send_raw(tls.outgoing.read())
                data = await self._recv_raw()
                if data:
                    tls.incoming.write(data)
                else:
                    tls.incoming.write_eof()
        await self._send_raw(tls.outgoing.read())
        self._tls = tls

    async def recv_some(self) -> bytes:
        """What arrives next (b"" at the end of the connection)."""
        while True:
            if self._tls is None:
                return await self._recv_raw()
            try:
                data = self._tls.session.read(HANDSHAKE_READ_BYTES)
            except ssl.SSLWantReadError:
                data = None
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            await self._send_raw(self._tls.outgoing.read())
            if data is not None:
                return data
            raw = await self._recv_raw()
            if raw:
                self._tls.incoming.write(raw)
            else:
                self._tls.incoming.write_eof()

    async def send_all(self, data: bytes) -> None:
        await self._send_raw(self._tls.seal(data) if self._tls is not None else data)

    async def read_head(self, limit: int, timeout_seconds: float) -> bytes:
        """The bytes up to and with the first blank line (an HTTP head); what follows stays kept. HandshakeEnded when
        the connection ends first, the head is longer than `limit`, or it takes longer than the timeout."""
        try:
            return await asyncio.wait_for(self._head(limit), timeout_seconds)
        except asyncio.TimeoutError:
            raise HandshakeEnded(f"no complete HTTP head within {timeout_seconds:g} s") from None

    async def _head(self, limit: int) -> bytes:
        while True:
            end = self.kept.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self.kept[: end + 4])
                del self.kept[: end + 4]
                return head
            if len(self.kept) > limit:
                raise HandshakeEnded(f"an HTTP head longer than {limit} bytes")
            try:
                data = await self.recv_some()
            except (OSError, ssl.SSLError) as error:
                raise HandshakeEnded(f"the connection failed ({error})") from None
            if not data:
                raise HandshakeEnded("the connection closed")
            self.kept += data

    def take_kept(self) -> bytes:
        kept = bytes(self.kept)
        self.kept.clear()
        return kept

    async def _recv_raw(self) -> bytes:
        while True:
            try:
                return self.sock.recv(HANDSHAKE_READ_BYTES)
            except _AGAIN:
                await self._ready(writable=False)

    async def _send_raw(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except _AGAIN:
                await self._ready(writable=True)

    async def _ready(self, writable: bool) -> None:
        waiter: asyncio.Future[None] = self.loop.create_future()
        fd = self.sock.fileno()
        if writable:
            self.loop.add_writer(fd, _wake, waiter)
        else:
            self.loop.add_reader(fd, _wake, waiter)
        try:
            await waiter
        finally:
            if not self.closed:
                (self.loop.remove_writer if writable else self.loop.remove_reader)(fd)

    def watch_end(self) -> asyncio.Future[None]:
        """Until `stop_watching`: keep what the peer sends (up to WAITING_KEEP_BYTES) and notice the end of the
        connection, which the returned future is done at (a ZeroMQ connection waiting for its public partner)."""
        ended: asyncio.Future[None] = self.loop.create_future()

        def readable() -> None:
            try:
                data = self.sock.recv(HANDSHAKE_READ_BYTES)
            except _AGAIN:
                return
            except OSError:
                data = b""
            self.kept += data
            if not data or len(self.kept) >= WAITING_KEEP_BYTES:
                self.loop.remove_reader(self.sock.fileno())
            if not data:
                _wake(ended)

        self.loop.add_reader(self.sock.fileno(), readable)
        return ended

    def stop_watching(self) -> None:
        if not self.closed:
            self.loop.remove_reader(self.sock.fileno())

    # ------------------------------------------------------------ the data path (never blocks)

    def read_into(self, buffer: memoryview) -> int:
        """Plaintext read into `buffer` (for TLS, that of every whole record one read of the socket completed); 0 at
        the end of the connection, WOULD_BLOCK when nothing is there yet. OSError or ssl.SSLError when the
        connection failed (a record that does not decrypt)."""
        tls = self._tls
        try:
            count = self.sock.recv_into(buffer if tls is None else buffer[: len(buffer) - TLS_RECORD_ROOM])
        except _AGAIN:
            count = WOULD_BLOCK
        if count == 0:
            self.at_end = True
        if tls is None:
            return count
        if count > 0:
            tls.incoming.write(buffer[:count])
        plain, closed = tls.read_into(buffer)
        if tls.outgoing.pending:  # TLS's own answers (a key update)
            self.write(b"")
        self.at_end = self.at_end or closed
        if plain == 0:
            return 0 if self.at_end else WOULD_BLOCK
        return plain

    def write(self, data: bytes | bytearray | memoryview) -> bool:
        """Send `data` (sealed in TLS records, when it has TLS): True when the socket took it all, False when some
        waits in `unsent` (call `flush` when writable). OSError when the connection failed."""
        out = self._tls.seal(data) if self._tls is not None else data
        if self.unsent:
            self.unsent += out
            return False
        try:
            sent = self.sock.send(out) if out else 0
        except _AGAIN:
            sent = 0
        if sent < len(out):
            self.unsent += out[sent:]
            return False
        return True

    def flush(self) -> bool:
        """Send what waits; True once nothing does."""
        try:
            sent = self.sock.send(self.unsent)
        except _AGAIN:
            return False
        del self.unsent[:sent]
        return not self.unsent

    # ------------------------------------------------------------ the end

    def close(self) -> None:
        """Close now (a TLS connection says close_notify first when the socket takes it)."""
        if self.closed:
            return
        self.closed = True
        self._streams.discard(self)
        fd = self.sock.fileno()
        if fd >= 0:
            self.loop.remove_reader(fd)
            self.loop.remove_writer(fd)
            if self._tls is not None and not self.unsent:
                self._say_goodbye(self._tls)
        self.sock.close()

    def _say_goodbye(self, tls: _Tls) -> None:
        try:
            tls.session.unwrap()
        except (ssl.SSLError, ValueError):
            pass  # close_notify is made; the peer's is not waited for
        try:
            self.sock.send(tls.outgoing.read())
        except OSError:
            pass


class Acceptor:
    """Accepts every connection a listening socket holds at each wake-up, as a Stream handed to `on_stream`; rests
    ACCEPT_RETRY_SECONDS when it cannot (no descriptor left), rather than spin."""

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        streams: Streams,
        on_stream: Callable[[Stream], None],
    ) -> None:
        sock.setblocking(False)
        self.sock = sock
        self._loop = loop
        self._streams = streams
        self._on_stream = on_stream
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.sock.accept()
            except _AGAIN:
                return
            except OSError as error:
                logger.warning("cannot accept a connection at %s: %s", self.sock.getsockname(), error)
                self._loop.remove_reader(self.sock.fileno())
                self._loop.call_later(ACCEPT_RETRY_SECONDS, self._accept_again)
                return
            self._on_stream(Stream(sock, self._loop, self._streams))

    def _accept_again(self) -> None:
        if self.sock.fileno() >= 0:
            self._loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self._loop.remove_reader(self.sock.fileno())
        self.sock.close()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def tune(sock: socket.socket) -> None:
    """No Nagle delay (ZeroMQ's own TCP sockets set none either) and keep-alive probes on a TCP connection."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECONDS)
    except OSError:
        pass
