"""Opening a tunnel's public connection from the connecting side: directly or through the HTTP proxy the
environment names (CONNECT), then TLS (`tls://`, `wss://`: the server's certificate and name checked), then the
WebSocket upgrade (`ws://`, `wss://`). A failure is a `DialFailure` whose text is one line, and which says whether
trying again can help (a server not up yet) or not (a certificate that does not verify, a proxy that forbids it)."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from dataclasses import dataclass
from importlib import import_module
from types import ModuleType

from scaler.io.address import Address
from scaler.io.tunnel import proxy as proxies
from scaler.io.tunnel.pump import Framing
from scaler.io.tunnel.streams import HandshakeEnded, Stream, Streams, tune
from scaler.io.tunnel.tls import certificate_problem, client_context

#: How long the TCP connection, the proxy's answer, the TLS handshake and the upgrade may each take.
STEP_TIMEOUT_SECONDS = 10.0

WEBSOCKET_EXTRA = (
    "ws:// and wss:// addresses need the websocket extra, which is not installed: pip install "
    "'scaler-compute[websocket]' (it adds wsproto)"
)


class DialFailure(ConnectionError):
    """One line saying why the public connection could not be opened; `permanent`: trying again does not help
    until something changes (a certificate, a proxy's rules, an address)."""

    def __init__(self, text: str, permanent: bool) -> None:
        super().__init__(text)
        self.permanent = permanent


def websocket_module() -> ModuleType:
    """`scaler.io.tunnel.websocket`, or a DialFailure naming the extra when wsproto is missing."""
    try:
        return import_module("scaler.io.tunnel.websocket")
    except ImportError:
        raise DialFailure(WEBSOCKET_EXTRA, permanent=True) from None


@dataclass
class Opened:
    """A public connection ready to carry ZeroMQ bytes: its stream, its framing (WebSocket; None for tls://), and
    the ZeroMQ bytes that came with the server's answer to the upgrade."""

    stream: Stream
    framing: Framing | None = None
    first: bytes = b""


async def open_public(target: Address, streams: Streams) -> Opened:
    """A public connection to `target`; DialFailure when it cannot be opened."""
    where = str(target)
    try:
        proxy = proxies.proxy_for(target.scheme, target.host, target.port or 0, os.environ)
    except proxies.ProxySettingError as error:
        raise DialFailure(str(error), permanent=True) from None
    websocket = websocket_module() if target.is_websocket else None
    host, port = (proxy.host, proxy.port) if proxy else (target.host, target.port or 0)
    stream = await _connect(host, port, where, proxy, streams)
    try:
        if proxy is not None:
            await _ask_proxy(stream, proxy, target)
        if target.uses_tls:
            await _start_tls(stream, target, where)
        opened = Opened(stream)
        if websocket is not None:
            opened.framing, opened.first = await _upgrade(stream, websocket, target, where)
        return opened
    except BaseException:
        stream.close()
        raise


async def _connect(host: str, port: int, where: str, proxy: proxies.Proxy | None, streams: Streams) -> Stream:
    """A TCP connection to the first of HOST's addresses that answers."""
    loop = asyncio.get_running_loop()
    through = f" through the proxy {proxy.url} ({proxy.variable})" if proxy else ""
    try:
        return await asyncio.wait_for(_first_answering(loop, host.strip("[]"), port, streams), STEP_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        raise DialFailure(
            f"cannot reach {where}{through}: no answer within {STEP_TIMEOUT_SECONDS:g} s", False
        ) from None
    except OSError as error:
        raise DialFailure(f"cannot reach {where}{through}: {error.strerror or error}", permanent=False) from None


async def _first_answering(loop: asyncio.AbstractEventLoop, host: str, port: int, streams: Streams) -> Stream:
    addresses = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    failure: OSError = OSError(f"no address for {host}")
    for family, kind, protocol, _, address in addresses:
        stream = Stream(socket.socket(family, kind, protocol), loop, streams)
        try:
            await stream.connect(address)
        except OSError as error:
            stream.close()
            failure = error
            continue
        except BaseException:
            stream.close()
            raise
        tune(stream.sock)
        return stream
    raise failure


async def _ask_proxy(stream: Stream, proxy: proxies.Proxy, target: Address) -> None:
    port = target.port or 0
    try:
        await stream.send_all(proxies.connect_request(target.host.strip("[]"), port, proxy))
        head = await stream.read_head(proxies.MAX_REPLY_HEAD_BYTES, STEP_TIMEOUT_SECONDS)
        reply = proxies.parse_connect_reply(head)
    except (HandshakeEnded, OSError, ValueError) as error:
        raise DialFailure(f"the proxy {proxy.url} ({proxy.variable}) did not answer CONNECT to "
                          f"{target.host}:{port}: {error}", permanent=False) from None  # fmt: skip
    if not reply.is_tunnel:
        raise DialFailure(proxies.refusal_text(proxy, target.host, port, reply), reply.is_permanent_refusal)


async def _start_tls(stream: Stream, target: Address, where: str) -> None:
    try:
        await asyncio.wait_for(
            stream.start_tls(client_context(), server_side=False, server_hostname=target.host.strip("[]")),
            STEP_TIMEOUT_SECONDS,
        )
    except ssl.SSLCertVerificationError as error:
        raise DialFailure(f"{where}: {certificate_problem(error)}", permanent=True) from None
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError):
        raise DialFailure(f"{where}: the connection closed during the TLS handshake", permanent=False) from None
    except ssl.SSLError as error:
        raise DialFailure(
            f"{where} did not answer with TLS ({error.reason or error}): is it a tcp:// or ws:// address?", True
        ) from None
    except (OSError, asyncio.TimeoutError) as error:
        raise DialFailure(f"{where}: the TLS handshake did not complete ({error or 'timed out'})", False) from None


async def _upgrade(stream: Stream, websocket: ModuleType, target: Address, where: str) -> tuple[Framing, bytes]:
    connection, request = websocket.upgrade_request(target.host.strip("[]"), target.port, target.path)
    try:
        await stream.send_all(request)
        head = await stream.read_head(websocket.MAX_HEAD_BYTES, STEP_TIMEOUT_SECONDS)
    except (HandshakeEnded, OSError, ssl.SSLError) as error:
        raise DialFailure(f"{where}: no answer to the WebSocket upgrade ({error})", permanent=False) from None
    try:
        framing, payload = websocket.accept_upgrade(connection, head + stream.take_kept(), where)
    except websocket.UpgradeRefused as error:
        raise DialFailure(str(error), permanent=True) from None
    return framing, bytes(payload)
