"""The only place in `scaler` that creates ZeroMQ contexts and sockets and sets their options.

Every component (scheduler, object storage server, worker agent, processor, client, worker manager, monitor
readers, readiness probes) makes one `SocketFactory` with its `TransportSecurity` (None: plain TCP) and asks
it for sockets by role: a server binds a ROUTER (and the scheduler a PUB), a connecting side opens a DEALER
(or a SUB). The options every socket shares live here, and so does security: with a `TransportSecurity` the
factory secures every socket it binds as a server and every socket it connects as a client, so no component
handles keys itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import zmq

from scaler.io.address import TUNNEL_SCHEMES, Address, parse_address

if TYPE_CHECKING:
    from scaler.io.tunnel.tls import ServerCertificate

#: The ZAP domain of the monitor feed's socket: a server lets any authorised key read it (scaler.security.roles).
MONITOR_DOMAIN = "monitor"

#: A connection refused (the peer is still starting) is retried after this long, doubling up to the maximum.
RECONNECT_SECONDS = 0.01
RECONNECT_MAX_SECONDS = 1.0
#: Idle TCP links are probed after this long, so a peer behind a dropped NAT entry or a dead host is noticed.
KEEPALIVE_IDLE_SECONDS = 30
#: A secured server's ROUTER and a client's DEALER end a connection whose ZeroMQ pings go unanswered this long (by
#: default: the scheduler's `link_heartbeat_timeout_seconds`, the `Client`'s argument of the same name); they ping a
#: silent connection every third of it.
HEARTBEAT_TIMEOUT_SECONDS = 15.0
#: Status messages a slow monitor subscriber may fall behind by before old ones are dropped.
MONITOR_HIGH_WATER_MARK = 1000

Socket = zmq.Socket[Any]


class Closeable(Protocol):
    def close(self) -> None: ...


class TransportSecurity(Protocol):
    """How a component's sockets are secured: the seam for ZeroMQ CURVE (one implementation per scheme).

    One value per component, shared by every factory the component makes and inherited by the processes it
    forks, so it holds key material only (no socket, thread or context). The factory calls:

    - `secure_server(sock)` on every socket before it binds (CURVE: `curve_server` and the server's secret
      key);
    - `secure_client(sock)` on every socket before it connects (CURVE: the component's key pair and the
      server's public key);
    - `start_authenticator(context)` once per factory, before its first bind: whatever checks connecting peers
      on that context (CURVE: a ZAP handler fed from the folder of authorised public keys). The factory closes
      what it returns before it ends the context.

    The servers' shells also call `peer_roles()` (below).
    """

    def secure_server(self, sock: Socket) -> None: ...

    def secure_client(self, sock: Socket) -> None: ...

    def start_authenticator(self, context: zmq.Context[Any]) -> Closeable: ...

    def peer_roles(self) -> PeerRoles | None:
        """On a server: what each connected peer's key may do now (None: no authentication, every peer may do
        anything the protocol allows). The shells ask it about each registration and every second about open
        connections, so a revoked key is refused on a connection that is already open."""
        ...


class PeerRoles(Protocol):
    """The roles of an authenticated peer's key (its z85 public key, the `User-Id` of its messages); empty when
    the key is not, or no longer, authorised. See `scaler.security.roles`."""

    def roles_of(self, public_key: bytes) -> frozenset[str]: ...


class Sockets(Protocol):
    """What a component asks for its sockets: a `SocketFactory`, or in tests the in-memory network's stand-in
    (`scaler_rehearsal.testing.memory_network`), which the shells drive through the same `zmq_async` wrappers."""

    security: TransportSecurity | None

    def router(self, address: str, *, mandatory: bool = False, handover: bool = False) -> Socket: ...

    def publisher(
        self, address: str, high_water_mark: int = MONITOR_HIGH_WATER_MARK, watch_subscriptions: bool = False
    ) -> Socket: ...

    def dealer(
        self,
        address: str,
        identity: bytes | None = None,
        immediate: bool = False,
        heartbeat: bool = False,
        events: int = 0,
    ) -> Socket: ...

    def subscriber(
        self, address: str, topics: Sequence[bytes] = (b"",), high_water_mark: int = 0, events: int = 0
    ) -> Socket: ...

    def event_monitor(self, sock: Socket, events: int) -> Socket: ...

    def close(self) -> None: ...


class SocketFactory:
    """Sockets of one component, from one ZeroMQ context. `close()` ends the context once its sockets are closed."""

    def __init__(
        self,
        io_threads: int = 1,
        security: TransportSecurity | None = None,
        heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS,
        certificate: ServerCertificate | None = None,
        reconnect_max_seconds: float = RECONNECT_MAX_SECONDS,
    ) -> None:
        """`heartbeat_timeout_seconds`: how long the sockets made with ZeroMQ heartbeats (`router(handover=True)`
        with security, `dealer(heartbeat=True)`) wait for a ping's answer before they end the connection.
        `certificate`: what the sockets bound at `tls://` and `wss://` addresses present (the server's `tls_cert` and
        `tls_key`). `reconnect_max_seconds`: the longest wait between two tries of a refused connection (a readiness
        probe, which waits for a server that is starting, tries often to see it as soon as it listens)."""
        if heartbeat_timeout_seconds <= 0:
            raise ValueError(f"the heartbeat timeout must be positive, not {heartbeat_timeout_seconds}")
        if reconnect_max_seconds < RECONNECT_SECONDS:
            raise ValueError(f"the longest reconnect wait must be at least {RECONNECT_SECONDS} s, not "
                             f"{reconnect_max_seconds}")  # fmt: skip
        self._context: zmq.Context[Any] = zmq.Context(io_threads=io_threads)
        self.security = security
        self._heartbeat_timeout_seconds = heartbeat_timeout_seconds
        self._reconnect_max_seconds = reconnect_max_seconds
        self._authenticator: Closeable | None = None
        self._is_closed = False
        self._certificate = certificate
        #: public addresses of tunnels this factory's sockets serve, withdrawn when it closes
        self._served: list[Address] = []
        #: monitors attached before their socket connected (`events` of dealer, subscriber): (monitor, events)
        self._early_monitors: dict[Socket, tuple[Socket, int]] = {}

    # ------------------------------------------------------------ servers (bind)

    def router(self, address: str, *, mandatory: bool = False, handover: bool = False) -> Socket:
        """A bound ROUTER. `mandatory`: a send to a gone identity fails at once (the shell learns the peer
        died); `handover`: a reconnecting peer with the same identity takes its old routing entry over.

        With transport security there is no handover: a second connection that names an identity in use (an
        authorised key taking another peer's identity, to receive what is sent to it) is never read, not even
        once the first one is gone (libzmq leaves it unidentified: its peer must connect anew, as a client does
        when a new connection goes unanswered, client/core.py rule 6), and ZeroMQ heartbeats end a silent
        connection within the factory's heartbeat timeout so a peer that reconnects after a network failure gets its
        identity back."""
        sock = self._socket(zmq.ROUTER)
        _set_keepalive(sock)
        if mandatory:
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if handover and self.security is None:
            sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        elif handover:
            self._set_heartbeat(sock)
        return self._bind(sock, address)

    def publisher(
        self, address: str, high_water_mark: int = MONITOR_HIGH_WATER_MARK, watch_subscriptions: bool = False
    ) -> Socket:
        """A bound PUB: a subscriber that falls more than `high_water_mark` messages behind loses old ones,
        and never slows the publisher. `watch_subscriptions`: an XPUB instead, whose reads are the subscriptions, a
        topic's first (b"\\x01" + topic) and its last one ending (b"\\x00" + topic, also when its subscriber's
        connection closes), so that the publisher builds only what someone reads."""
        sock = self._socket(zmq.XPUB if watch_subscriptions else zmq.PUB, high_water_mark=high_water_mark)
        sock.setsockopt(zmq.ZAP_DOMAIN, MONITOR_DOMAIN.encode())  # a monitor-only key may connect here alone
        return self._bind(sock, address)

    # ------------------------------------------------------------ connecting sides

    def dealer(
        self,
        address: str,
        identity: bytes | None = None,
        immediate: bool = False,
        heartbeat: bool = False,
        events: int = 0,
    ) -> Socket:
        """A DEALER connected to `address`, with `identity` when the server must know it across reconnections.
        `immediate`: queue messages only to a completed connection, so that POLLOUT tells whether one exists.
        `heartbeat`: ZeroMQ pings the server every third of the factory's heartbeat timeout and ends a connection
        that stops answering within it, then connects again: a laptop that moved to another network has a dead
        connection that nothing closes (TCP keep-alive takes minutes). One DEALER serves a thread at a time: the
        client's blocking object storage connection and the async ones each open their own.
        `events`: connection events watched from before the socket connects; `event_monitor(sock, events)` returns
        their monitor. A handshake that fails for a protocol error (no keys at a CURVE server, a wrong key) ends its
        connection for good, since ZeroMQ does not connect again after one: its event is the only one, and a
        monitor attached once the connection started may come after it."""
        sock = self._socket(zmq.DEALER, identity=identity)
        _set_keepalive(sock)
        if immediate:
            sock.setsockopt(zmq.IMMEDIATE, 1)
        if heartbeat:
            self._set_heartbeat(sock)
        return self._connect(sock, address, events)

    def subscriber(
        self, address: str, topics: Sequence[bytes] = (b"",), high_water_mark: int = 0, events: int = 0
    ) -> Socket:
        """A SUB connected to `address`; `events` as for `dealer`."""
        sock = self._socket(zmq.SUB, high_water_mark=high_water_mark)
        for topic in topics:
            sock.setsockopt(zmq.SUBSCRIBE, topic)
        return self._connect(sock, address, events)

    # ------------------------------------------------------------ transport events

    def event_monitor(self, sock: Socket, events: int) -> Socket:
        """An in-process PAIR socket that receives `sock`'s connection `events` (zmq.EVENT_DISCONNECTED, ...);
        read it with `zmq_async.watch_events`. The one attached before `sock` connected, when it was made with
        these `events`."""
        early = self._early_monitors.pop(sock, None)
        if early is not None:
            monitor, watched = early
            if watched != events:
                monitor.close(linger=0)
                raise ValueError(f"the socket was made watching events {watched:#x}, not {events:#x}")
            return monitor
        attached: Socket = sock.get_monitor_socket(events)
        return attached

    # ------------------------------------------------------------ lifetime

    def close(self) -> None:
        """End the context (its sockets must be closed first; they have no linger, so this never blocks)."""
        if self._is_closed:
            return
        self._is_closed = True
        if self._served:
            from scaler.io.tunnel.relay import relay

            for public in self._served:
                relay().withdraw(public)
        if self._authenticator is not None:
            self._authenticator.close()  # its socket lives on the context: closed before the context ends
        self._context.term()

    # ------------------------------------------------------------ helpers

    def _socket(self, kind: int, identity: bytes | None = None, high_water_mark: int = 0) -> Socket:
        sock: Socket = self._context.socket(kind)
        sock.setsockopt(zmq.SNDHWM, high_water_mark)
        sock.setsockopt(zmq.RCVHWM, high_water_mark)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RECONNECT_IVL, int(RECONNECT_SECONDS * 1000))
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, int(self._reconnect_max_seconds * 1000))
        if identity is not None:
            sock.setsockopt(zmq.IDENTITY, identity)
        return sock

    def _set_heartbeat(self, sock: Socket) -> None:
        timeout_ms = max(1, round(self._heartbeat_timeout_seconds * 1000))
        sock.setsockopt(zmq.HEARTBEAT_IVL, max(1, timeout_ms // 3))
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, timeout_ms)

    def _bind(self, sock: Socket, address: str) -> Socket:
        try:
            if self.security is not None:
                if self._authenticator is None:
                    self._authenticator = self.security.start_authenticator(self._context)
                self.security.secure_server(sock)
            public = _tunnel_address(address)
            if public is None:
                sock.bind(address)
            else:
                self._bind_tunnel(sock, public)
        except BaseException:
            sock.close(linger=0)
            raise
        return sock

    def _bind_tunnel(self, sock: Socket, public: Address) -> None:
        """Bind at a private endpoint of this process and have its relay serve `public` there (scaler.io.tunnel)."""
        from scaler.io.tunnel.relay import relay

        endpoint = relay().private_endpoint()
        sock.bind(endpoint)
        kind = sock.getsockopt(zmq.TYPE)
        what = "a scaler monitor feed" if kind in (zmq.PUB, zmq.XPUB) else "a scaler scheduler or object storage server"
        served = relay().serve(public, endpoint, self._certificate, what)
        self._served.append(served)
        _public_endpoints[sock] = str(served)

    def _connect(self, sock: Socket, address: str, events: int = 0) -> Socket:
        monitor: Socket | None = None
        try:
            if self.security is not None:
                self.security.secure_client(sock)
            if events:
                monitor = sock.get_monitor_socket(events)
            target = _tunnel_address(address)
            if target is not None:
                from scaler.io.tunnel.relay import relay

                address = relay().dial(target)
                # the relay keeps the connection waiting while the target does not answer: no handshake timeout
                sock.setsockopt(zmq.HANDSHAKE_IVL, 0)
            sock.connect(address)
        except BaseException:
            if monitor is not None:
                monitor.close(linger=0)
            sock.close(linger=0)
            raise
        if monitor is not None:
            self._early_monitors[sock] = (monitor, events)
        return sock


#: sockets bound through a tunnel -> the public address they serve
_public_endpoints: weakref.WeakKeyDictionary[Socket, str] = weakref.WeakKeyDictionary()


def _tunnel_address(address: str) -> Address | None:
    """The parsed address when a tunnel carries it (tls://, ws://, wss://); None for ZeroMQ's own transports."""
    if address.partition("://")[0] not in TUNNEL_SCHEMES:
        return None
    return parse_address(address)


def bound_endpoint(sock: Socket) -> str:
    """The endpoint a socket actually bound (the port the OS chose for `tcp://host:0`; a tunnel's public address)."""
    public = _public_endpoints.get(sock)
    if public is not None:
        return public
    endpoint = sock.getsockopt(zmq.LAST_ENDPOINT)
    return endpoint.decode() if isinstance(endpoint, bytes) else str(endpoint)


def _set_keepalive(sock: Socket) -> None:
    sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
    sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, KEEPALIVE_IDLE_SECONDS)
