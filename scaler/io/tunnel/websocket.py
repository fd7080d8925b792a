"""The WebSocket side of a tunnel (RFC 6455): the upgrade a connecting side asks for and what a server answers (the
upgrade, a short page for a plain GET, 404 for a path it does not serve), through wsproto (sans-io), then binary
messages that each carry a slice of the ZeroMQ stream (`frames`). docs/protocol.md, section 2.6, is the contract."""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import RemoteProtocolError

from scaler.io.tunnel import frames

#: The subprotocol both sides name in the upgrade: binary messages carry ZMTP 3.1, nothing else.
SUBPROTOCOL = "zmtp.scaler"
#: The longest HTTP head (request or reply) read before the upgrade.
MAX_HEAD_BYTES = 16 * 1024


class UpgradeRefused(ConnectionError):
    """The server did not switch to WebSocket; `status` 0 when its answer was not HTTP."""

    def __init__(self, text: str, status: int) -> None:
        super().__init__(text)
        self.status = status


class WebSocketFraming:
    """An open WebSocket: ZeroMQ bytes in binary messages, both ways (one message per slice given to `wrap`), framed
    by `frames` (`masks`: this side is the connecting one, whose frames the RFC wants masked)."""

    def __init__(self, masks: bool) -> None:
        self._masks = masks
        self._reader = frames.WebSocketFrameReader(peer_masks=not masks)
        self._close_sent = False

    @property
    def closed(self) -> bool:
        return self._reader.closed or self._close_sent

    def wrap(self, payload: bytes | memoryview) -> bytes:
        """`payload` as one binary message (b"" once closed: what ZeroMQ still sends then is dropped, as on a
        closed TCP connection)."""
        if self.closed:
            return b""
        return frames.frame(frames.BINARY, payload, self._masks)

    def unwrap(self, data: bytes) -> tuple[bytes, bytes]:
        """(the ZeroMQ bytes that `data` carried, what to send back: pongs, the answer to a close); `closed` is set
        once the peer closed (or broke the protocol: answered with a close)."""
        payload, replies = self._reader.read(data)
        answer = b""
        for opcode, body in replies:
            if self._close_sent:
                break
            self._close_sent = opcode == frames.CLOSE
            answer += frames.frame(opcode, body, self._masks)
        return payload, answer

    def close(self) -> bytes:
        """The close frame to send before the connection ends (b"" once closed)."""
        if self.closed:
            return b""
        self._close_sent = True
        return frames.frame(frames.CLOSE, struct.pack("!H", frames.CLOSE_NORMAL), self._masks)


# ------------------------------------------------------------------ connecting side


def upgrade_request(host: str, port: int, path: str) -> tuple[WSConnection, bytes]:
    """The connection and the upgrade request of a connecting side."""
    connection = WSConnection(ConnectionType.CLIENT)
    authority = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    request = connection.send(Request(host=authority, target=path or "/", subprotocols=[SUBPROTOCOL]))
    return connection, request


def accept_upgrade(connection: WSConnection, received: bytes, where: str) -> tuple[WebSocketFraming, bytes]:
    """What the server answered (its head and any bytes after it): the open WebSocket and the ZeroMQ bytes already
    received; UpgradeRefused with one line saying what the server answered instead."""
    end = received.find(b"\r\n\r\n") + 4
    head, rest = (received[:end], received[end:]) if end >= 4 else (received, b"")
    try:
        connection.receive_data(head)
        events = list(connection.events())
    except RemoteProtocolError as error:
        raise UpgradeRefused(
            f"{where} did not answer the WebSocket upgrade as a WebSocket server: {error}", 0
        ) from None
    first = events[0] if events else None
    if isinstance(first, AcceptConnection):
        if first.subprotocol != SUBPROTOCOL:
            raise UpgradeRefused(f"{where} accepted the WebSocket without the subprotocol {SUBPROTOCOL}: it is not a "
                                 "scaler address", 0)  # fmt: skip
        framing = WebSocketFraming(masks=True)
        payload, _ = framing.unwrap(rest)
        return framing, payload
    if isinstance(first, RejectConnection):
        try:
            connection.receive_data(rest)
            events += list(connection.events())
        except RemoteProtocolError:
            pass
        body = b"".join(bytes(event.data) for event in events if isinstance(event, RejectData))
        said = body.decode("utf-8", "replace").strip().splitlines()
        detail = f": {said[0][:200]}" if said else ""
        raise UpgradeRefused(
            f"{where} refused the WebSocket upgrade with {first.status_code}{detail}", first.status_code
        )
    raise UpgradeRefused(f"{where} closed during the WebSocket upgrade", 0)


# ------------------------------------------------------------------ server side


@dataclass(frozen=True)
class Upgrade:
    """Switch to WebSocket: send `reply`, then carry the route's stream."""

    path: str
    reply: bytes
    framing: WebSocketFraming


@dataclass(frozen=True)
class PlainReply:
    """Answer with `reply` and close (a plain GET, a path not served, not a WebSocket request)."""

    reply: bytes


def answer_request(head: bytes, paths: Collection[str], what: str) -> Upgrade | PlainReply:
    """What a server answers to the request head `head` (up to and with its blank line) at a port serving `paths`;
    `what` says what the port is, for the page a plain GET gets."""
    request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    method, _, rest = request_line.partition(" ")
    target = rest.rpartition(" ")[0] or "/"
    headers = _headers(head)
    path = target.split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return PlainReply(_page(405, "Method Not Allowed", f"{what}: only GET and WebSocket upgrades here\n"))
    if path not in paths:
        served = ", ".join(sorted(paths))
        return PlainReply(
            _page(404, "Not Found", f"no scaler address at {path}; this port serves {served}\n", method == "GET")
        )
    if "websocket" not in headers.get("upgrade", "").lower():
        return PlainReply(_page(200, "OK", _describe(what, paths), with_body=method == "GET"))
    connection = WSConnection(ConnectionType.SERVER)
    try:
        connection.receive_data(head)
        request = next(connection.events(), None)
    except RemoteProtocolError as error:
        return PlainReply(_page(400, "Bad Request", f"not a WebSocket upgrade: {error}\n"))
    if not isinstance(request, Request):
        return PlainReply(_page(400, "Bad Request", "not a WebSocket upgrade\n"))
    if SUBPROTOCOL not in request.subprotocols:
        return PlainReply(
            _page(400, "Bad Request", f"offer the WebSocket subprotocol {SUBPROTOCOL} (docs/protocol.md)\n")
        )
    reply = connection.send(AcceptConnection(subprotocol=SUBPROTOCOL))
    return Upgrade(path, reply, WebSocketFraming(masks=False))


def _headers(head: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    return headers


def _describe(what: str, paths: Collection[str]) -> str:
    return (
        f"{what}: a scaler address over WebSocket (subprotocol {SUBPROTOCOL}, binary messages carrying ZeroMQ's "
        f"ZMTP 3.1 stream) at {', '.join(sorted(paths))}. Connect a scaler client, worker or scaler_top to "
        'ws(s)://HOST:PORT/PATH (docs/protocol.md, "WebSocket addresses").\n'
    )


def _page(status: int, reason: str, text: str, with_body: bool = True) -> bytes:
    body = text.encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + (body if with_body else b"")
