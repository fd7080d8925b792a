"""The server side of tunnels: one `Listener` per public host and port of a process, TLS terminated by it
(`tls://`, `wss://`), WebSocket upgrades routed by path (`ws://`, `wss://`: one port may serve several paths), and
each accepted connection joined to a fresh connection to its route's private ZeroMQ endpoint."""

from __future__ import annotations

import asyncio
import logging
import ssl
from types import ModuleType

from scaler.io.address import Address, parse_address
from scaler.io.tunnel.links import HandshakeEnded, Link, tune

logger = logging.getLogger(__name__)

#: How long an accepted connection may take to finish its TLS handshake, and then to send its upgrade request.
HANDSHAKE_TIMEOUT_SECONDS = 10.0


class Listener:
    """A public port of this process: its scheme, its TLS context, and path -> private ZeroMQ endpoint."""

    def __init__(self, scheme: str, context: ssl.SSLContext | None, websocket: ModuleType | None) -> None:
        self.scheme = scheme
        self.context = context
        self.routes: dict[str, str] = {}  #: path ("/" for tls://) -> the ZeroMQ endpoint it is carried to
        self.descriptions: dict[str, str] = {}  #: path -> what serves it, for the page a plain GET gets
        self._websocket = websocket
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen; the port bound (the one asked for). OSError when it cannot be bound."""
        loop = asyncio.get_running_loop()
        self._server = server = await loop.create_server(
            self._accepted, host.strip("[]") if host not in ("*", "") else None, port, ssl=self.context,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_SECONDS if self.context is not None else None,
            reuse_address=True,
        )  # fmt: skip
        return int(server.sockets[0].getsockname()[1])

    def descriptors(self) -> list[int]:
        """The listening sockets' descriptors."""
        return [sock.fileno() for sock in self._server.sockets] if self._server is not None else []

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()

    def _accepted(self) -> Link:
        return Link(on_made=self._made)

    def _made(self, link: Link) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(link))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, link: Link) -> None:
        assert link.transport is not None
        tune(link.transport)
        try:
            endpoint = await self._route(link)
        except HandshakeEnded as error:
            logger.debug("a connection to a tunnel's port ended before its upgrade: %s", error)
            link.close()
            return
        if endpoint is None:
            return
        try:
            inner = await open_private(endpoint)
        except OSError as error:  # the socket closed since (the server stops): the peer connects again later
            logger.debug("the private endpoint %s does not answer: %s", endpoint, error)
            link.close()
            return
        link.join(inner)

    async def _route(self, link: Link) -> str | None:
        """The private endpoint an accepted connection is for (None: answered and closed: a plain GET, a path not
        served)."""
        if self._websocket is None:
            return self.routes.get("/")
        head = await link.read_head(self._websocket.MAX_HEAD_BYTES, HANDSHAKE_TIMEOUT_SECONDS)
        what = " and ".join(sorted(set(self.descriptions.values()))) or "scaler"
        answer = self._websocket.answer_request(head, list(self.routes), what)
        link.write(answer.reply)
        if isinstance(answer, self._websocket.Reply):
            link.close()
            return None
        link.framing = answer.framing
        return self.routes.get(answer.path)


async def open_private(endpoint: str) -> Link:
    """A connection to a ZeroMQ endpoint of this machine (an ipc path, or a tcp address)."""
    loop = asyncio.get_running_loop()
    address = parse_address(endpoint)
    if address.scheme == "ipc":
        _, link = await loop.create_unix_connection(Link, address.host)
    else:
        _, link = await loop.create_connection(Link, address.host, address.port or 0)
    return link


def public_address(scheme: str, host: str, port: int, path: str) -> Address:
    return Address(scheme, host, port, path if scheme in ("ws", "wss") else "")
