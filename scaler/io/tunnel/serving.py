"""The server side of tunnels: one `Listener` per public host and port of a process, TLS terminated by it
(`tls://`, `wss://`), WebSocket upgrades routed by path (`ws://`, `wss://`: one port may serve several paths), and
each accepted connection joined to a fresh connection to its route's private ZeroMQ endpoint."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from types import ModuleType

from scaler.io.address import Address, parse_address
from scaler.io.tunnel.pump import Framing, Joint, ReadBuffer
from scaler.io.tunnel.streams import Acceptor, HandshakeEnded, Stream, Streams, tune

logger = logging.getLogger(__name__)

#: How long an accepted connection may take to finish its TLS handshake, and then to send its upgrade request.
HANDSHAKE_TIMEOUT_SECONDS = 10.0


class Listener:
    """A public port of this process: its scheme, its TLS context, and path -> private ZeroMQ endpoint."""

    def __init__(
        self,
        scheme: str,
        context: ssl.SSLContext | None,
        websocket: ModuleType | None,
        streams: Streams,
        buffer: ReadBuffer,
    ) -> None:
        self.scheme = scheme
        self.context = context
        self.routes: dict[str, str] = {}  #: path ("/" for tls://) -> the ZeroMQ endpoint it is carried to
        self.descriptions: dict[str, str] = {}  #: path -> what serves it, for the page a plain GET gets
        self._websocket = websocket
        self._streams = streams
        self._buffer = buffer
        self._acceptors: list[Acceptor] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()

    def start(self, host: str, port: int) -> int:
        """Listen; the port bound (the one asked for). OSError when it cannot be bound."""
        sockets = _listening_sockets(host, port)
        self._acceptors = [Acceptor(sock, self._loop, self._streams, self._accepted) for sock in sockets]
        return int(sockets[0].getsockname()[1])

    def close(self) -> None:
        for acceptor in self._acceptors:
            acceptor.close()
        for task in list(self._tasks):
            task.cancel()

    def close_inherited(self) -> None:
        """In a forked child: close the listening sockets here only (the port stays the parent's)."""
        for acceptor in self._acceptors:
            acceptor.sock.close()

    def _accepted(self, stream: Stream) -> None:
        task = self._loop.create_task(self._serve(stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, stream: Stream) -> None:
        tune(stream.sock)
        try:
            if self.context is not None:
                await asyncio.wait_for(stream.start_tls(self.context, True, None), HANDSHAKE_TIMEOUT_SECONDS)
            route = await self._route(stream)
        except (HandshakeEnded, OSError, ssl.SSLError, asyncio.TimeoutError) as error:
            logger.debug("a connection to a tunnel's port ended before its handshake was done: %s", error)
            stream.close()
            return
        if route is None:
            stream.close()
            return
        endpoint, framing = route
        try:
            inner = await open_private(endpoint, self._streams)
        except OSError as error:  # the socket closed since (the server stops): the peer connects again later
            logger.debug("the private endpoint %s does not answer: %s", endpoint, error)
            stream.close()
            return
        Joint(stream, framing, inner, self._buffer).start()

    async def _route(self, stream: Stream) -> tuple[str, Framing | None] | None:
        """The private endpoint an accepted connection is for, and its framing (None: answered, to be closed: a
        plain GET, a path not served)."""
        if self._websocket is None:
            endpoint = self.routes.get("/")
            return (endpoint, None) if endpoint is not None else None
        head = await stream.read_head(self._websocket.MAX_HEAD_BYTES, HANDSHAKE_TIMEOUT_SECONDS)
        what = " and ".join(sorted(set(self.descriptions.values()))) or "scaler"
        answer = self._websocket.answer_request(head, list(self.routes), what)
        await asyncio.wait_for(stream.send_all(answer.reply), HANDSHAKE_TIMEOUT_SECONDS)
        if isinstance(answer, self._websocket.PlainReply):
            return None
        endpoint = self.routes.get(answer.path)
        return (endpoint, answer.framing) if endpoint is not None else None


def _listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening sockets at HOST:PORT (every address of a name; both IP versions for a wildcard where the system
    has them), non-blocking, all at the port the first one bound."""
    if host in ("*", ""):
        if socket.has_dualstack_ipv6():
            return [_listen(socket.AF_INET6, ("::", port), dualstack=True)]
        return [_listen(socket.AF_INET, ("0.0.0.0", port))]
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, _, _, _, address in dict.fromkeys(infos):
            bound = (address[0], sockets[0].getsockname()[1] if sockets else port, *address[2:])
            sockets.append(_listen(family, bound))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _listen(family: int, address: tuple[object, ...], dualstack: bool = False) -> socket.socket:
    sock = socket.create_server(address, family=family, backlog=socket.SOMAXCONN, dualstack_ipv6=dualstack)
    sock.setblocking(False)
    return sock


async def open_private(endpoint: str, streams: Streams) -> Stream:
    """A connection to a ZeroMQ endpoint of this machine (an ipc path, or a tcp address)."""
    loop = asyncio.get_running_loop()
    address = parse_address(endpoint)
    if address.scheme == "ipc":
        stream = Stream(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), loop, streams)
        target: tuple[object, ...] | str = address.host
    else:
        infos = await loop.getaddrinfo(address.host.strip("[]"), address.port or 0, type=socket.SOCK_STREAM)
        family, kind, protocol, _, target = infos[0]
        stream = Stream(socket.socket(family, kind, protocol), loop, streams)
    try:
        await stream.connect(target)
    except BaseException:
        stream.close()
        raise
    tune(stream.sock)
    return stream


def public_address(scheme: str, host: str, port: int, path: str) -> Address:
    return Address(scheme, host, port, path if scheme in ("ws", "wss") else "")
