"""The data path of a tunnel: a `Joint` carries one ZeroMQ connection between its public stream (TLS records or
WebSocket messages) and its private one (ZeroMQ's own bytes), from the loop's reader and writer callbacks. One
wake-up reads what is there (up to the relay's buffer) and writes it on at once; what the other side does not take
yet waits in its stream (`Stream.unsent`), and this side is not read until it is written (flow control both ways).
The end of either stream ends the other, once what waits there is written."""

from __future__ import annotations

import logging
import ssl
from typing import Protocol

from scaler.io.tunnel.streams import WOULD_BLOCK, Stream

logger = logging.getLogger("scaler.io.tunnel")

#: How much one read takes at most (one relay's buffer, shared by its joints: its loop runs one callback at a time).
READ_BYTES = 256 * 1024
#: How long an ending joint may take to write what waits before its connections are closed anyway.
CLOSE_FLUSH_SECONDS = 5.0


class Framing(Protocol):
    """How a public connection carries ZeroMQ bytes (WebSocket messages; TLS alone needs none)."""

    @property
    def closed(self) -> bool: ...

    def wrap(self, payload: bytes | memoryview) -> bytes: ...

    def unwrap(self, data: bytes) -> tuple[bytes, bytes]: ...

    def close(self) -> bytes: ...


class ReadBuffer:
    """The buffer a relay's joints read into, one for all of them."""

    def __init__(self, size: int = READ_BYTES) -> None:
        self.view = memoryview(bytearray(size))


class _End:
    """One stream of a joint, with its framing, and whether it is read."""

    def __init__(self, stream: Stream, framing: Framing | None) -> None:
        self.stream = stream
        self.framing = framing
        self.reading = False
        self.partner: _End = self


class Joint:
    """A public and a private stream carrying one ZeroMQ connection between them."""

    def __init__(
        self, public: Stream, framing: Framing | None, private: Stream, buffer: ReadBuffer, first: bytes = b""
    ) -> None:
        """`framing`: the public stream's (None: TLS or nothing); `first`: ZeroMQ bytes the public side's handshake
        already unframed, written to the private stream first."""
        self._public = _End(public, framing)
        self._private = _End(private, None)
        self._public.partner, self._private.partner = self._private, self._public
        self._buffer = buffer
        self._loop = public.loop
        self._first = first
        self.ended = False

    def start(self) -> None:
        """Carry: the bytes the handshakes left come first, then what each side reads."""
        if self._first:
            self._write(self._private, self._first)
        for end in (self._public, self._private):
            kept = end.stream.take_kept()
            if kept and not self.ended:
                self._carry(end, memoryview(kept))
        for end in (self._public, self._private):
            if not end.partner.stream.unsent:
                self._resume(end)

    # ------------------------------------------------------------ reading

    def _readable(self, end: _End) -> None:
        try:
            count = end.stream.read_into(self._buffer.view)
        except (OSError, ssl.SSLError) as error:
            self._failed(end, error)
            return
        if count > 0:
            self._carry(end, self._buffer.view[:count])
        if count != WOULD_BLOCK and end.stream.at_end:
            self.end()

    def _carry(self, end: _End, data: memoryview) -> None:
        """What `end` read goes to its partner (unframed first, when it has a framing)."""
        if end.framing is None:
            self._write(end.partner, data)
            return
        payload, answer = end.framing.unwrap(bytes(data))
        if answer:  # already framed: pongs, the answer to a close
            self._send(end, answer)
        if payload:
            self._write(end.partner, payload)
        if end.framing.closed:
            self.end()

    # ------------------------------------------------------------ writing

    def _write(self, end: _End, data: bytes | memoryview) -> None:
        """Write ZeroMQ bytes to `end`, framed when it has a framing."""
        self._send(end, end.framing.wrap(data) if end.framing is not None else data)

    def _send(self, end: _End, data: bytes | memoryview) -> None:
        if end.stream.closed or not data:
            return
        waited = bool(end.stream.unsent)
        try:
            taken = end.stream.write(data)
        except (OSError, ssl.SSLError) as error:
            self._failed(end, error)
            return
        if not taken and not waited:
            self._loop.add_writer(end.stream.fileno(), self._writable, end)
            self._pause(end.partner)

    def _writable(self, end: _End) -> None:
        try:
            done = end.stream.flush()
        except (OSError, ssl.SSLError) as error:
            self._failed(end, error)
            return
        if not done:
            return
        self._loop.remove_writer(end.stream.fileno())
        if self.ended:
            end.stream.close()
        else:
            self._resume(end.partner)

    def _pause(self, end: _End) -> None:
        if end.reading:
            end.reading = False
            if not end.stream.closed:
                self._loop.remove_reader(end.stream.fileno())

    def _resume(self, end: _End) -> None:
        if not end.reading and not self.ended and not end.stream.closed:
            end.reading = True
            self._loop.add_reader(end.stream.fileno(), self._readable, end)

    # ------------------------------------------------------------ the end

    def _failed(self, end: _End, error: BaseException) -> None:
        logger.debug("a tunnelled connection failed: %s", error)
        end.stream.unsent.clear()
        end.stream.close()
        self.end()

    def end(self) -> None:
        """End both connections: each closes once what waits there is written (a WebSocket says goodbye first), or
        after CLOSE_FLUSH_SECONDS."""
        if self.ended:
            return
        self.ended = True
        for end in (self._public, self._private):
            self._pause(end)
            if end.framing is not None and not end.stream.closed:
                self._send(end, end.framing.close())
            if not end.stream.unsent:
                end.stream.close()
        if self._public.stream.unsent or self._private.stream.unsent:
            self._loop.call_later(CLOSE_FLUSH_SECONDS, self._close_now)

    def _close_now(self) -> None:
        for end in (self._public, self._private):
            end.stream.unsent.clear()
            end.stream.close()
