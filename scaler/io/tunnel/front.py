"""A tunnel address in front of a scheduler's three native endpoints (scheduler, object storage, monitor): a second
way in for the peers that can only use TLS or WebSocket (a laptop behind an HTTPS proxy, a browser), beside the
native addresses the others use. A WebSocket one serves the three at the paths /, /storage and /monitor of its one
port; a tls:// one at its port, +1 and +2."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.io.address import Address, AddressError, parse_address

if TYPE_CHECKING:  # the browser client reads `storage_for` here, where no TLS is
    from scaler.io.tunnel.tls import ServerCertificate

#: The paths of a WebSocket front: the scheduler, its object storage, its monitor.
FRONT_PATHS = ("/", "/storage", "/monitor")
_WHAT = ("a scaler scheduler", "a scaler object storage server", "a scaler monitor feed")


def front_addresses(address: str, host: str | None = None, port: int | None = None) -> list[str]:
    """The scheduler's, object storage's and monitor's addresses at the front `address` (with another `host` or
    `port` when given: where a peer reaches it)."""
    base = parse_address(address)
    host = host if host is not None else base.host
    port = port if port is not None else base.port or 0
    if base.is_websocket:
        root = (base.path or "/").rstrip("/")
        return [str(Address(base.scheme, host, port, f"{root}{path}")) for path in FRONT_PATHS]
    return [str(Address(base.scheme, host, port + offset)) for offset in range(3)]


def storage_for(advertised: str, front: str, reached: str) -> str:
    """The object storage address for a peer that reached a scheduler at `reached`, told `advertised` (the storage's
    native address) and the scheduler's front `front` ("": none): through the front when the peer came through it
    (a WebSocket address for a WebSocket front, a tls:// one for a tls:// front), at the host, port and root path it
    used, which may be a proxy's rather than the front's own; `advertised` otherwise."""
    try:
        bound, used = parse_address(front), parse_address(reached)
    except AddressError:
        return advertised
    if not (bound.is_tunnel and used.is_tunnel and bound.is_websocket == used.is_websocket):
        return advertised
    return front_addresses(str(used))[1]


def serve_front(address: str, endpoints: tuple[str, str, str], certificate: ServerCertificate | None) -> int:
    """Serve the front `address` in this process's relay, each of its three addresses carried to the native
    endpoint of the same rank (scheduler, object storage, monitor); the port served (the first one of tls://).
    TunnelError or TlsFileError when it cannot."""
    from scaler.io.tunnel.relay import relay

    served_port: int | None = None
    for index, (endpoint, what) in enumerate(zip(endpoints, _WHAT, strict=True)):
        public = parse_address(front_addresses(address, port=served_port)[index])
        served = relay().serve(public, endpoint, certificate, what)
        if served_port is None:
            served_port = served.port
    assert served_port is not None
    return served_port
