"""The byte streams a browser client's connections run on, and the ZeroMQ DEALER over one (`DealerLink`).

A scheduler or object storage address is `ws://HOST:PORT[/PATH]` or `wss://...` in a browser: a WebSocket whose binary
messages carry the very bytes a `tcp://` connection to the same server carries (docs/protocol.md, "WebSocket
addresses"), so the DEALER speaks ZMTP over it (`scaler.protocol.zmtp`). Outside a browser (CPython: this client's
tests, its measurement), `tcp://HOST:PORT` is an asyncio TCP stream. Either way everything runs on the running
asyncio loop (in Pyodide, its WebLoop: the page's own event loop).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from scaler.browser.js_boxes import page_boxes
from scaler.browser.links_base import is_browser
from scaler.protocol import zmtp
from scaler.protocol.zmtp_curve import CurveKeys

#: How long opening a connection may take before it fails.
OPEN_TIMEOUT_SECONDS = 15.0
#: The WebSocket subprotocol a scaler address speaks (docs/protocol.md, "WebSocket addresses"): binary messages that
#: carry ZMTP 3.1.
SUBPROTOCOL = "zmtp.scaler"


class ByteStream(Protocol):
    """An open byte stream: what is written leaves in order; what arrives goes to the callback it was opened with."""

    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...


BytesArrived = Callable[[bytes], None]
Closed = Callable[[str], None]


async def open_stream(address: str, arrived: BytesArrived, closed: Closed) -> ByteStream:
    """A byte stream to `address`; `closed(reason)` is called once, when it ends (not after `close()`). Raises
    ConnectionError naming the address when it cannot be opened."""
    scheme = address.split("://", 1)[0]
    if scheme in ("ws", "wss"):
        if not is_browser():
            raise ConnectionError(
                f"{address}: this client opens WebSocket addresses only in a browser; from Python, connect "
                "scaler.Client to the address"
            )
        return await _WebSocketStream.open(address, arrived, closed)
    if scheme == "tcp":
        if is_browser():
            raise ConnectionError(
                f"{address}: a browser reaches a cluster only over WebSocket: give the ws:// (or wss://) address "
                "its stack binds for browsers (`scaler --example web` prints it)"
            )
        return await _TcpStream.open(address, arrived, closed)
    raise ValueError(f"{address!r} is not an address this client can connect to: give ws://HOST:PORT or wss://...")


class _TcpStream:
    def __init__(self, writer: asyncio.StreamWriter, reading: asyncio.Task[None]) -> None:
        self._writer = writer
        self._reading = reading

    @classmethod
    async def open(cls, address: str, arrived: BytesArrived, closed: Closed) -> _TcpStream:
        parts = urlsplit(address)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"{address!r} is not tcp://HOST:PORT")
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(parts.hostname, parts.port), OPEN_TIMEOUT_SECONDS
            )
        except (OSError, asyncio.TimeoutError) as error:
            raise ConnectionError(f"could not connect to {address}: {error or 'no answer'}") from None
        return cls(writer, asyncio.ensure_future(_read_all(reader, arrived, closed, address)))

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    def close(self) -> None:
        self._reading.cancel()
        self._writer.close()


async def _read_all(reader: asyncio.StreamReader, arrived: BytesArrived, closed: Closed, address: str) -> None:
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                closed(f"{address} closed the connection")
                return
            arrived(data)
    except OSError as error:
        closed(f"the connection to {address} failed: {error}")


class _WebSocketStream:
    """The browser's WebSocket (through Pyodide's bridge to JavaScript), binary messages only."""

    def __init__(self, socket: Any, handlers: list[Any]) -> None:
        self._socket = socket
        self._handlers = handlers  #: the JavaScript proxies of the callbacks, destroyed when it closes

    @classmethod
    async def open(cls, address: str, arrived: BytesArrived, closed: Closed) -> _WebSocketStream:
        import js  # type: ignore[import-not-found]  # Pyodide's bridge: only in a browser
        from pyodide.ffi import create_proxy  # type: ignore[import-not-found]

        socket = js.WebSocket.new(address, SUBPROTOCOL)
        socket.binaryType = "arraybuffer"
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        is_open = [False]

        def on_open(_event: Any) -> None:
            is_open[0] = True
            if not opened.done():
                opened.set_result(None)

        def on_message(event: Any) -> None:
            arrived(event.data.to_bytes())

        def on_close(event: Any) -> None:
            reason = f" ({event.reason})" if getattr(event, "reason", "") else ""
            if not opened.done():
                opened.set_exception(ConnectionError(f"could not open a WebSocket to {address}{reason}"))
            elif is_open[0]:
                is_open[0] = False
                closed(f"the WebSocket to {address} closed{reason}")

        handlers = [create_proxy(on_open), create_proxy(on_message), create_proxy(on_close)]
        socket.onopen, socket.onmessage, socket.onclose = handlers
        stream = cls(socket, handlers)
        try:
            await asyncio.wait_for(opened, OPEN_TIMEOUT_SECONDS)
        except asyncio.TimeoutError:
            stream.close()
            raise ConnectionError(f"no WebSocket answer from {address} in {OPEN_TIMEOUT_SECONDS:g} s") from None
        except ConnectionError:
            stream.close()
            raise
        return stream

    def write(self, data: bytes) -> None:
        from pyodide.ffi import to_js

        self._socket.send(to_js(data))

    def close(self) -> None:
        self._socket.onopen = self._socket.onmessage = self._socket.onclose = None
        self._socket.close()
        for handler in self._handlers:
            handler.destroy()
        self._handlers = []


class DealerLink:
    """A ZeroMQ DEALER's one connection over a byte stream: messages (lists of frames) out and in, in order. Messages
    sent before the connection is up wait for it. Its end (the server closed it, refused it, or it could not be
    opened) is told once to `lost`, with the reason. With `keys`, secured with CURVE."""

    def __init__(
        self, address: str, identity: bytes, received: Callable[[list[bytes]], None], lost: Closed,
        keys: CurveKeys | None = None,
    ) -> None:  # fmt: skip
        self.address = address
        self._zmtp = zmtp.ZmtpDealer(identity, address, keys, os.urandom, page_boxes())
        self._received = received
        self._lost = lost
        self._stream: ByteStream | None = None
        self._is_over = False

    @property
    def is_ready(self) -> bool:
        return self._zmtp.is_ready and not self._is_over

    async def open(self) -> None:
        """Open the stream and start the handshake (its end is told to `lost`, not raised)."""
        try:
            self._stream = await open_stream(self.address, self._arrived, self._closed)
        except (ConnectionError, ValueError) as error:
            self._closed(str(error))
            return
        self._stream.write(self._zmtp.start())

    def send(self, frames: Sequence[bytes]) -> None:
        """Queued by the ZMTP core until the handshake is done (which needs the stream open)."""
        if self._is_over:
            return
        data = self._zmtp.send(frames)
        if data and self._stream is not None:
            self._stream.write(data)

    def close(self) -> None:
        self._is_over = True
        if self._stream is not None:
            self._stream.close()

    def _arrived(self, data: bytes) -> None:
        events, answer = self._zmtp.receive(data)
        if answer and self._stream is not None:
            self._stream.write(answer)
        for event in events:
            if isinstance(event, zmtp.MessageReceived):
                self._received(event.frames)
            elif isinstance(event, zmtp.ConnectionEnded):
                self._closed(event.reason)

    def _closed(self, reason: str) -> None:
        if self._is_over:
            return
        if self._stream is not None and not self._zmtp.is_ready:
            reason = self._zmtp.closed()  # what how far the handshake got says
        self._is_over = True
        if self._stream is not None:
            self._stream.close()
        self._lost(reason)
