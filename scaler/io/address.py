"""Address grammar: parse, validate and derive the addresses components bind and connect to.

Accepted forms: `tcp://host:port`, `ipc:///absolute/path`, `inproc://name`, and the tunnelled ones (ZeroMQ's own
stream carried inside TLS or WebSocket by `scaler.io.tunnel`): `tls://host:port`, `ws://host[:port][/path]` and
`wss://host[:port][/path]` (ports 80 and 443 by default). A malformed address is refused with an `AddressError`
that lists the accepted forms.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

ACCEPTED_FORMS = (
    "tcp://HOST:PORT (e.g. tcp://127.0.0.1:8516), ipc:///ABSOLUTE/PATH, inproc://NAME, tls://HOST:PORT, "
    "ws://HOST[:PORT][/PATH] or wss://HOST[:PORT][/PATH]"
)

#: Schemes whose bytes a tunnel carries (`scaler.io.tunnel`): a socket bound or connected at one of them uses a
#: private ipc endpoint of its process, and the process's relay carries the stream to and from the public address.
TUNNEL_SCHEMES = ("tls", "ws", "wss")
#: Schemes with a host and a port (what `with_port_offset` derives from, what a port owner is looked up for).
NETWORK_SCHEMES = ("tcp", *TUNNEL_SCHEMES)
_DEFAULT_PORTS = {"ws": 80, "wss": 443}
_WILDCARD_HOSTS = ("*", "0.0.0.0")


class AddressError(ValueError):
    """An address string that does not follow the grammar."""


@dataclass(frozen=True, slots=True)
class Address:
    scheme: str  #: "tcp", "ipc", "inproc", "tls", "ws" or "wss"
    host: str  #: host for tcp, tls, ws and wss, path for ipc, name for inproc
    port: int | None  #: tcp, tls, ws and wss only
    path: str = ""  #: ws and wss only: the HTTP path of the WebSocket upgrade, "/" by default

    def __str__(self) -> str:
        if self.scheme in ("ws", "wss"):
            return f"{self.scheme}://{self.host}:{self.port}{self.path or '/'}"
        if self.scheme in NETWORK_SCHEMES:
            return f"{self.scheme}://{self.host}:{self.port}"
        return f"{self.scheme}://{self.host}"

    @property
    def is_tunnel(self) -> bool:
        """Carried by the process's tunnel relay (TLS or WebSocket), not by ZeroMQ itself."""
        return self.scheme in TUNNEL_SCHEMES

    @property
    def uses_tls(self) -> bool:
        return self.scheme in ("tls", "wss")

    @property
    def is_websocket(self) -> bool:
        return self.scheme in ("ws", "wss")

    @property
    def has_port(self) -> bool:
        return self.scheme in NETWORK_SCHEMES

    def with_port_offset(self, offset: int) -> Address:
        """The same host (and path) with port + offset: the convention for object storage (+1) and monitor (+2)."""
        if self.port is None:
            raise AddressError(f"{self} has no port, so no address can be derived from it; give one explicitly")
        port = self.port + offset
        if not 0 < port < 65536:
            raise AddressError(f"{self}: port {self.port} + {offset} is outside 1-65535")
        return Address(self.scheme, self.host, port, self.path)

    def with_scheme(self, scheme: str) -> Address:
        """The same host and port at another network scheme (a tunnel's native twin, tcp://HOST:PORT)."""
        return Address(scheme, self.host, self.port, self.path if scheme in ("ws", "wss") else "")

    def connectable(self) -> Address:
        """An address a peer can connect to: a wildcard bind host becomes the loopback address."""
        if self.has_port and self.host in _WILDCARD_HOSTS:
            return Address(self.scheme, "127.0.0.1", self.port, self.path)
        return self


def parse_address(text: str) -> Address:
    if not isinstance(text, str) or "://" not in text:
        raise AddressError(f"malformed address {text!r}: accepted forms are {ACCEPTED_FORMS}")
    scheme, _, rest = text.partition("://")
    if scheme in ("tcp", "tls"):
        host, port = _host_and_port(text, rest, None)
        return Address(scheme, host, port)
    if scheme in ("ws", "wss"):
        authority, slash, path = rest.partition("/")
        host, port = _host_and_port(text, authority, _DEFAULT_PORTS[scheme])
        return Address(scheme, host, port, slash + path if slash else "/")
    if scheme == "ipc":
        if not rest.startswith("/"):
            raise AddressError(f"malformed address {text!r}: ipc needs an absolute path; accepted forms are "
                               f"{ACCEPTED_FORMS}")  # fmt: skip
        return Address("ipc", rest, None)
    if scheme == "inproc":
        if not rest:
            raise AddressError(f"malformed address {text!r}: inproc needs a name; accepted forms are {ACCEPTED_FORMS}")
        return Address("inproc", rest, None)
    raise AddressError(f"malformed address {text!r}: unknown scheme {scheme!r}; accepted forms are {ACCEPTED_FORMS}")


def _host_and_port(text: str, authority: str, default_port: int | None) -> tuple[str, int]:
    """HOST:PORT, or HOST alone when the scheme has a default port (an IPv6 host in brackets: [::1])."""
    if default_port is not None and (":" not in authority or authority.endswith("]")):
        host, port_text = authority, str(default_port)
    else:
        host, _, port_text = authority.rpartition(":")
    if not host or not port_text.isdigit():
        scheme = text.partition("://")[0]
        needs = "a host and a port" if default_port is None else "a host (and a port)"
        raise AddressError(f"malformed address {text!r}: {scheme} needs {needs}; accepted forms are {ACCEPTED_FORMS}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise AddressError(f"malformed address {text!r}: port {port} is outside 1-65535")
    return host, port


def parse_http_address(text: str, what: str, example: str) -> tuple[str, int]:
    """The `HOST:PORT` an HTTP server listens on (the dashboard's `gui_address`, the scheduler's `metrics_address`;
    `:PORT` and `tcp://HOST:PORT` too) -> (host, port), the host 127.0.0.1 when empty and port 0 any free one.
    AddressError naming `what` and giving `example` when it is not one."""
    host, colon, port = str(text).removeprefix("tcp://").rpartition(":")
    if not colon or not port.isdigit():
        raise AddressError(f"{what} {text!r} is not HOST:PORT (e.g. {example})")
    if not 0 <= int(port) < 65536:
        raise AddressError(f"{what} {text!r}: port {int(port)} is outside 0-65535 (e.g. {example})")
    return host or "127.0.0.1", int(port)


#: The monitor address the reference implementation's scheduler printed by default, and its documents show
#: (`scaler_top ipc:///tmp/127.0.0.1_2345_monitor`): an ipc socket named after the scheduler's host and port. Ours
#: publishes its monitor at tcp://HOST:PORT+2 instead.
REFERENCE_MONITOR_NAME = re.compile(r"ipc:///tmp/(?P<host>[^/]+)_(?P<port>[0-9]{1,5})_monitor")


def reference_monitor_scheduler(text: str) -> Address | None:
    """The scheduler address a reference default monitor name encodes (`ipc:///tmp/127.0.0.1_2345_monitor`:
    tcp://127.0.0.1:2345), reachable from this machine; None for any other address."""
    match = REFERENCE_MONITOR_NAME.fullmatch(text)
    if match is None or not 0 < int(match["port"]) < 65536:
        return None
    return Address("tcp", match["host"], int(match["port"])).connectable()


def monitor_address_to_read(text: str, is_socket: Callable[[str], bool]) -> tuple[str, str]:
    """The monitor address a monitor tool reads when given `text`, and a line saying why when it is not `text`
    ("" when it is). A reference default monitor name (`ipc:///tmp/<host>_<port>_monitor`) whose socket file does
    not exist (`is_socket(path)` false) names a scheduler of ours: its monitor at tcp://<host>:<port + 2> is read
    (a wildcard host, 0.0.0.0 or *, as 127.0.0.1). Any other address is read as given. Raises AddressError when
    the port + 2 is past 65535."""
    scheduler = reference_monitor_scheduler(text)
    if scheduler is None or is_socket(text.removeprefix("ipc://")):
        return text, ""
    if scheduler.port is None or scheduler.port + 2 > 65535:
        raise AddressError(f"{text} names the scheduler at {scheduler}, whose monitor would be at its port + 2, past "
                           "65535: give the monitor address the scheduler printed")  # fmt: skip
    monitor = str(scheduler.with_port_offset(2))
    return monitor, (
        f"reading the monitor at {monitor}: {text} is the default monitor name of scaler 1.x, and no such socket "
        f"exists; the scheduler at {scheduler} publishes its monitor at its port + 2"
    )


def is_socket_file(path: str) -> bool:
    """Whether `path` is a Unix socket (an ipc address's file) on this machine."""
    import os
    import stat

    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def validate_address(text: str) -> str:
    """Check an address and return it normalised; raises AddressError."""
    return str(parse_address(text))


def free_tcp_address(host: str = "127.0.0.1") -> str:
    """A tcp address on a port that is free right now (for local clusters and tests)."""
    return f"tcp://{host}:{free_tcp_port_block(1, host)}"


#: The lowest port handed out: above the well-known and most registered service ports.
LOWEST_FREE_PORT = 10000

#: "LOW-HIGH" narrows the ports `free_tcp_port_block` hands out to LOW..HIGH. Two processes that pick free ports at
#: the same time can pick the same block between one's check and the other's bind; processes given disjoint ranges
#: never do (the test suite gives each of its test processes, and what they start, a range of its own).
PORT_RANGE_VARIABLE = "SCALER_PORT_RANGE"


def free_tcp_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A base port such that base .. base+count-1 are all free right now.

    The ports are chosen below the system's ephemeral range (where the kernel picks the local ports of
    outgoing connections): a port from that range can be taken by any new connection between this check and
    the server's bind, which made a freshly started server fail to listen now and then under load."""
    import random
    import socket

    lowest, highest = _port_range()
    highest_base = highest + 1 - count
    for _ in range(200):
        base = random.randint(lowest, highest_base) if highest_base > lowest else 0
        if base == 0:  # no room below the ephemeral range: let the kernel choose
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((host, 0))
                base = probe.getsockname()[1]
        if base + count >= 65536:
            continue
        sockets = []
        try:
            for offset in range(count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(s)
                s.bind((host, base + offset))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise OSError(f"could not find {count} consecutive free ports on {host}")


def _port_range() -> tuple[int, int]:
    """The lowest and highest port handed out: SCALER_PORT_RANGE's, else from LOWEST_FREE_PORT to just below the
    ephemeral range."""
    import os

    text = os.environ.get(PORT_RANGE_VARIABLE, "")
    if text:
        low, _, high = text.partition("-")
        try:
            lowest, highest = int(low), int(high)
        except ValueError:
            raise ValueError(f"{PORT_RANGE_VARIABLE}={text!r}: expected LOW-HIGH, two port numbers") from None
        if not 0 < lowest <= highest < 65536:
            raise ValueError(f"{PORT_RANGE_VARIABLE}={text!r}: expected 0 < LOW <= HIGH < 65536")
        return lowest, highest
    return LOWEST_FREE_PORT, _ephemeral_range_start() - 1


def port_range_share(index: int, count: int) -> str:
    """The SCALER_PORT_RANGE of the `index`th of `count` processes that share this host's free ports in equal,
    disjoint parts."""
    lowest, highest = LOWEST_FREE_PORT, _ephemeral_range_start() - 1
    size = (highest - lowest + 1) // max(count, 1)
    low = lowest + (index % max(count, 1)) * size
    return f"{low}-{low + size - 1}"


def _ephemeral_range_start() -> int:
    """The first port of the kernel's range for outgoing connections (Linux; 32768 elsewhere, its default)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as file:
            return int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
