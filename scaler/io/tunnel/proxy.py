"""Which HTTP proxy a tunnel goes through, and the CONNECT exchange with it (pure: the environment is given).

As curl and browsers do: `wss://` and `tls://` connections use `https_proxy` (or `HTTPS_PROXY`), `ws://` ones
`http_proxy` (or `HTTP_PROXY`, except in a CGI program, as Python's urllib: there a request's header sets it); a host
that `no_proxy` (or `NO_PROXY`) names, as a name, a domain suffix (`.corp` or `corp`), an IP address or network
(`10.0.0.0/8`), with or without `:PORT`, or `*` for all, is reached directly. The proxy is asked to CONNECT to the
address's host and port, and the tunnel's TLS and WebSocket run inside that connection, end to end.
"""

from __future__ import annotations

import base64
import ipaddress
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

#: The longest reply head a proxy may send to CONNECT.
MAX_REPLY_HEAD_BYTES = 16 * 1024


class ProxySettingError(ValueError):
    """A proxy variable that cannot be used (the message names it)."""


@dataclass(frozen=True)
class Proxy:
    variable: str  #: the environment variable that named it, for messages
    url: str  #: as given, without credentials
    host: str
    port: int
    authorization: str | None = None  #: a Proxy-Authorization value, from user:password in the URL


def proxy_for(scheme: str, host: str, port: int, environment: Mapping[str, str]) -> Proxy | None:
    """The proxy a connection to HOST:PORT of `scheme` ("tls", "ws", "wss") goes through; None: directly. Raises
    ProxySettingError naming the variable when it is not an http:// URL with a host."""
    if scheme == "ws":
        names: tuple[str, ...] = ("http_proxy",) if "REQUEST_METHOD" in environment else ("http_proxy", "HTTP_PROXY")
    else:
        names = ("https_proxy", "HTTPS_PROXY")
    variable = next((name for name in names if environment.get(name)), None)
    if variable is None or _bypassed(host, port, environment.get("no_proxy") or environment.get("NO_PROXY") or ""):
        return None
    return parse_proxy(variable, environment[variable])


def parse_proxy(variable: str, text: str) -> Proxy:
    value = text.strip()
    parsed = urllib.parse.urlsplit(value if "://" in value else f"http://{value}")
    if parsed.scheme != "http":
        raise ProxySettingError(
            f"{variable}={text!r}: only an http:// proxy is supported (the proxy is asked to CONNECT; the TLS of a "
            "wss:// or tls:// address runs inside that connection, end to end)"
        )
    try:
        port = parsed.port or 80
    except ValueError:
        raise ProxySettingError(f"{variable}={text!r}: the port is not a number") from None
    if not parsed.hostname:
        raise ProxySettingError(f"{variable}={text!r}: no proxy host (e.g. http://proxy.example.com:3128)")
    authorization = None
    if parsed.username is not None:
        user = urllib.parse.unquote(parsed.username)
        password = urllib.parse.unquote(parsed.password or "")
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    shown = f"http://{parsed.hostname}:{port}"
    return Proxy(variable, shown, parsed.hostname, port, authorization)


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    host = host.strip("[]").lower().rstrip(".")
    for entry in (item.strip().lower() for item in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if _matches(host, name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [IPv6]:PORT
        address, _, rest = entry[1:].partition("]")
        return address, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    name, colon, port = entry.rpartition(":")
    if colon and port.isdigit() and ":" not in name:
        return name, int(port)
    return entry, None


def _matches(host: str, name: str) -> bool:
    try:
        network = ipaddress.ip_network(name, strict=False)
    except ValueError:
        suffix = name.lstrip(".").rstrip(".")
        return host == suffix or host.endswith("." + suffix)
    try:
        return ipaddress.ip_address(host) in network
    except ValueError:
        return False


def connect_request(host: str, port: int, proxy: Proxy) -> bytes:
    """The CONNECT request that asks `proxy` for a tunnel to HOST:PORT."""
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(frozen=True)
class ConnectReply:
    status: int
    reason: str

    @property
    def is_tunnel(self) -> bool:
        return 200 <= self.status < 300

    @property
    def is_permanent_refusal(self) -> bool:
        """A refusal that asking again does not change (forbidden, authentication wanted, CONNECT not allowed);
        a gateway error (502, 503, 504: the target did not answer the proxy) is not."""
        return not self.is_tunnel and self.status not in (502, 503, 504)


def parse_connect_reply(head: bytes) -> ConnectReply:
    """The status of a proxy's reply head (its status line and headers, up to the blank line). ValueError when it
    is not HTTP."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    version, _, rest = line.partition(" ")
    status, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/") or not status.isdigit():
        raise ValueError(f"not an HTTP reply: {line[:80]!r}")
    return ConnectReply(int(status), reason.strip())


def refusal_text(proxy: Proxy, host: str, port: int, reply: ConnectReply) -> str:
    """One line for a proxy that did not open the tunnel."""
    what = f"{reply.status} {reply.reason}".strip()
    if reply.status == 407:
        fix = f"give the proxy's user and password in {proxy.variable} (http://USER:PASSWORD@HOST:PORT)"
    elif reply.is_permanent_refusal:
        fix = f"ask its administrator to allow CONNECT to port {port}, or set no_proxy={host} to connect directly"
    else:
        fix = f"the proxy could not reach {host}:{port}; it is tried again"
    return f"the proxy {proxy.url} ({proxy.variable}) refused to CONNECT to {host}:{port}: {what}; {fix}"
