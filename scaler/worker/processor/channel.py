"""The private link between a worker agent and one of its processors: a Unix socket pair. It carries the processor's
ProcessorReady and its agent's configuration (a HelloReply), nothing else: tasks and everything about them travel on
the processor's own link to the scheduler (outlet.py). Its closing tells the processor that its agent is gone.

Each frame is one encoded message, prefixed with its length (4 bytes, little endian); several frames
written together form a batch. The processor side blocks, and can also read without blocking (`BlockingChannel.poll`:
one recv), which the processor does before a task's turn passes; the agent side runs on the agent's asyncio loop.
"""

from __future__ import annotations

import asyncio
import select
import socket
import struct
from collections.abc import Callable, Iterable

from scaler.protocol import codec
from scaler.protocol import messages as m

_LENGTH = struct.Struct("<I")


def encode_frames(frames: Iterable[bytes]) -> bytes:
    return b"".join(_LENGTH.pack(len(frame)) + frame for frame in frames)


class FrameReader:
    """Accumulates bytes and yields the complete frames (pure: no I/O)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames = []
        offset, size = 0, len(self._buffer)
        while size - offset >= 4:
            (length,) = _LENGTH.unpack_from(self._buffer, offset)
            if size - offset - 4 < length:
                break
            frames.append(bytes(self._buffer[offset + 4 : offset + 4 + length]))
            offset += 4 + length
        if offset:
            del self._buffer[:offset]
        return frames


class ChannelClosed(Exception):
    """The other side of the channel is gone."""


class BlockingChannel:
    """The processor's side. `wait` blocks until the channel has something to read, `poll` reads what it has
    without blocking. Reads must not overlap: threads.py makes them under its lock, from whichever thread
    holds the baton or passes the computing turn on. Sends come from any thread, serialised by the caller."""

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        self._socket.setblocking(True)
        self._reader = FrameReader()
        self._readable = select.poll()  #: `poll`'s question: asked without an exception when the channel is empty
        self._readable.register(sock.fileno(), select.POLLIN)

    def send(self, message: m.Message) -> None:
        self.send_all((message,))

    def send_all(self, messages: Iterable[m.Message]) -> None:
        """Several messages in one write (the agent reads them together)."""
        try:
            self._socket.sendall(encode_frames([codec.encode(message) for message in messages]))
        except (BrokenPipeError, ConnectionResetError) as error:
            raise ChannelClosed("the worker agent closed the channel") from error

    def wait(self, timeout_seconds: float | None, also: tuple[int, ...] = ()) -> bool:
        """Whether the channel, or one of the descriptors `also`, is readable (a message, or the agent gone) within the
        timeout (None: no limit)."""
        readable, _, _ = select.select([self._socket.fileno(), *also], [], [], timeout_seconds)
        return bool(readable)

    def poll(self) -> list[m.Message]:
        """The messages the channel holds now, without blocking: a poll, then a recv only when there is something (an
        empty channel, the common case before a task's turn passes, costs no exception). Raises ChannelClosed when the
        agent is gone."""
        if not self._readable.poll(0):
            return []
        try:
            data = self._socket.recv(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return []
        except ConnectionResetError:
            data = b""
        if not data:
            raise ChannelClosed("the worker agent closed the channel")
        return [codec.decode(frame) for frame in self._reader.feed(data)]

    def close(self) -> None:
        self._socket.close()


class AsyncChannel:
    """The agent's side of one processor's channel, on the running loop. `on_frames(frames)` gets
    each batch; `on_closed()` is called once when the processor's end is gone."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        on_frames: Callable[[list[bytes]], None],
        on_closed: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._socket = sock
        self._socket.setblocking(False)
        self._on_frames = on_frames
        self._on_closed = on_closed
        self._reader = FrameReader()
        self._outgoing = bytearray()
        self._waiting_writable = False  #: the socket's buffer was full: the loop writes the rest when it drains
        self._closed = False
        self._closing = False  #: `_close_and_report` is reading what remains
        loop.add_reader(sock.fileno(), self._readable)

    def send(self, frames: list[bytes]) -> None:
        """Write frames (what the socket does not take now leaves when it can)."""
        if self._closed:
            return
        self._outgoing += encode_frames(frames)
        if not self._waiting_writable:
            self._write()

    def _write(self) -> None:
        try:
            sent = self._socket.send(self._outgoing)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._close_and_report()
            return
        del self._outgoing[:sent]
        if self._outgoing:
            self._waiting_writable = True
            self._loop.add_writer(self._socket.fileno(), self._writable)

    def _writable(self) -> None:
        self._waiting_writable = False
        self._loop.remove_writer(self._socket.fileno())
        if not self._closed and self._outgoing:
            self._write()

    def _readable(self) -> None:
        try:
            data = self._socket.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_and_report()
            return
        frames = self._reader.feed(data)
        if frames:
            self._on_frames(frames)

    def read_remaining(self) -> None:
        """Hand on every frame the processor wrote before it ended (its process is gone: all it sent is in
        the socket), so that a ProcessorReady it sent before dying is heard before its death (it had started)."""
        while not self._closed:
            try:
                data = self._socket.recv(1 << 20)
            except OSError:  # BlockingIOError: nothing more; another error: nothing more to read either
                return
            if not data:
                return
            frames = self._reader.feed(data)
            if frames:
                self._on_frames(frames)

    def _close_and_report(self) -> None:
        """The processor's end is gone (EOF, or a write refused: EPIPE, ECONNRESET). What it wrote before it went is
        still in the socket and is handed on first (`read_remaining`)."""
        if self._closed or self._closing:
            return
        self._closing = True  # a handler of the frames read now may write again, and fail the same way
        self.read_remaining()
        self.close()
        self._on_closed()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        fileno = self._socket.fileno()
        if fileno >= 0:
            self._loop.remove_reader(fileno)
            self._loop.remove_writer(fileno)
        self._socket.close()
