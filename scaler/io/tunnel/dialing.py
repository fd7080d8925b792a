"""Opening a tunnel's public connection from the connecting side: directly or through the HTTP proxy the
environment names (CONNECT), then TLS (`tls://`, `wss://`: the server's certificate and name checked), then the
WebSocket upgrade (`ws://`, `wss://`). A failure is a `DialFailure` whose text is one line, and which says whether
trying again can help (a server not up yet) or not (a certificate that does not verify, a proxy that forbids it)."""

from __future__ import annotations

import asyncio
import os
import ssl
from importlib import import_module
from types import ModuleType

from scaler.io.address import Address
from scaler.io.tunnel import proxy as proxies
from scaler.io.tunnel.links import HandshakeEnded, Link, tune
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


async def open_public(target: Address) -> tuple[Link, bytes]:
    """A public connection to `target`, ready to carry ZeroMQ bytes, and the ZeroMQ bytes already received with the
    server's answer; DialFailure when it cannot be opened."""
    where = str(target)
    try:
        proxy = proxies.proxy_for(target.scheme, target.host, target.port or 0, os.environ)
    except proxies.ProxySettingError as error:
        raise DialFailure(str(error), permanent=True) from None
    websocket = websocket_module() if target.is_websocket else None
    link = await _connect(proxy.host if proxy else target.host, proxy.port if proxy else target.port or 0, where,
                          proxy)  # fmt: skip
    try:
        if proxy is not None:
            await _ask_proxy(link, proxy, target)
        if target.uses_tls:
            await _start_tls(link, target, where)
        payload = b""
        if websocket is not None:
            payload = await _upgrade(link, websocket, target, where)
        return link, payload
    except BaseException:
        link.close()
        raise


async def _connect(host: str, port: int, where: str, proxy: proxies.Proxy | None) -> Link:
    loop = asyncio.get_running_loop()
    through = f" through the proxy {proxy.url} ({proxy.variable})" if proxy else ""
    try:
        _, link = await asyncio.wait_for(loop.create_connection(Link, host.strip("[]"), port), STEP_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        raise DialFailure(
            f"cannot reach {where}{through}: no answer within {STEP_TIMEOUT_SECONDS:g} s", False
        ) from None
    except OSError as error:
        raise DialFailure(f"cannot reach {where}{through}: {error.strerror or error}", permanent=False) from None
    assert link.transport is not None
    tune(link.transport)
    return link


async def _ask_proxy(link: Link, proxy: proxies.Proxy, target: Address) -> None:
    port = target.port or 0
    link.write(proxies.connect_request(target.host.strip("[]"), port, proxy))
    try:
        head = await link.read_head(proxies.MAX_REPLY_HEAD_BYTES, STEP_TIMEOUT_SECONDS)
        reply = proxies.parse_connect_reply(head)
    except (HandshakeEnded, ValueError) as error:
        raise DialFailure(f"the proxy {proxy.url} ({proxy.variable}) did not answer CONNECT to "
                          f"{target.host}:{port}: {error}", permanent=False) from None  # fmt: skip
    if not reply.is_tunnel:
        raise DialFailure(proxies.refusal_text(proxy, target.host, port, reply), reply.is_permanent_refusal)


async def _start_tls(link: Link, target: Address, where: str) -> None:
    loop = asyncio.get_running_loop()
    assert link.transport is not None
    try:
        transport = await loop.start_tls(
            link.transport, link, client_context(), server_hostname=target.host.strip("[]"),
            ssl_handshake_timeout=STEP_TIMEOUT_SECONDS,
        )  # fmt: skip
    except ssl.SSLCertVerificationError as error:
        raise DialFailure(f"{where}: {certificate_problem(error)}", permanent=True) from None
    except ssl.SSLError as error:
        raise DialFailure(
            f"{where} did not answer with TLS ({error.reason or error}): is it a tcp:// or ws:// address?", True
        ) from None
    except (OSError, asyncio.TimeoutError) as error:
        raise DialFailure(f"{where}: the TLS handshake did not complete ({error or 'timed out'})", False) from None
    if transport is None:
        raise DialFailure(f"{where}: the connection closed during the TLS handshake", permanent=False)
    link.transport = transport


async def _upgrade(link: Link, websocket: ModuleType, target: Address, where: str) -> bytes:
    connection, request = websocket.upgrade_request(target.host.strip("[]"), target.port, target.path)
    link.write(request)
    try:
        head = await link.read_head(websocket.MAX_HEAD_BYTES, STEP_TIMEOUT_SECONDS)
    except HandshakeEnded as error:
        raise DialFailure(f"{where}: no answer to the WebSocket upgrade ({error})", permanent=False) from None
    try:
        framing, payload = websocket.accept_upgrade(connection, head + link.take_kept(), where)
    except websocket.UpgradeRefused as error:
        raise DialFailure(str(error), permanent=True) from None
    link.framing = framing
    return bytes(payload)
