"""An in-memory stand-in for ZeroMQ, at the one seam that makes sockets: `MemoryNetwork.sockets()` is what a
shell's `SocketFactory` is, and its sockets are what the shells' `AsyncSocket`s, `Outbox`es and `watch_events`
already drive (`scaler.io.zmq_async`): the shells run unchanged, with their own batching and their own reactions
to transport events, and no message leaves the process.

What is modelled, as far as the shells rely on it:

- ROUTER (bound) and DEALER (connected, with an identity): a DEALER's messages reach the ROUTER bound at its
  address with the identity in front; the ROUTER routes by identity (a reconnecting identity takes its routing
  over: ROUTER_HANDOVER), and a send to an identity that is gone raises EHOSTUNREACH when the ROUTER is mandatory
  (which is how the scheduler learns that a peer died), and is dropped otherwise.
- A DEALER whose ROUTER is gone keeps what it sends and delivers it, in order, to the next ROUTER bound at that
  address (ZeroMQ reconnects): that is a scheduler restart.
- PUB and SUB, with topic prefixes.
- Connection events (`event_monitor`): EVENT_DISCONNECTED on both sides when either side closes or crashes, with
  a connection number as the value; frames received with copy=False give that number as their SRCFD, so the
  scheduler's probe of the peers of a closed connection works as on TCP.
- `crash(sockets)`: every socket of one component is cut off at once (SIGKILL): nothing it still sends leaves.
- `cut(sockets)`, then `heal(sockets)` or `move(sockets)`: a component's connections go silent both ways with no
  event (a network cut: packets dropped); healed, what was sent meanwhile is delivered late, in order (TCP carried
  it once the path came back); moved, it is lost with the dead connections, which close (events on both sides), and
  each DEALER connects again on a new connection (a laptop on another network, from a new source address).

Each socket signals waiting messages on a pipe (its FD), which the loop watches, so delivery is one loop turn
later, as with real sockets. Delivery is lossless and in order. `traffic` records every message sent (sender,
receiver, frames) for tests that check batching.
"""

from __future__ import annotations

import collections
import errno
import itertools
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from scaler.io.sockets import TransportSecurity


class MemoryFrame(zmq.Frame):
    """A received frame (copy=False) that knows the connection it came on."""

    connection = -1

    def get(self, option: Any) -> Any:
        if option == zmq.SRCFD:
            return self.connection
        return super().get(option)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One multipart message that crossed the network: who sent it, to whom, and its frames (identity excluded)."""

    sender: str
    receiver: str
    frames: tuple[bytes, ...]


class MemorySocket:
    """What a shell holds in place of a zmq.Socket: the calls `AsyncSocket` makes, and close."""

    def __init__(self, network: MemoryNetwork, kind: int, address: str, name: str) -> None:
        self.network = network
        self.kind = kind
        self.address = address
        self.name = name
        self.closed = False
        self.severed = False  #: cut off by a crash: sends vanish, nothing arrives
        self._inbox: collections.deque[tuple[int, list[bytes]]] = collections.deque()
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._signalled = False
        self.monitors: list[MemoryMonitor] = []

    # ------------------------------------------------------------ what AsyncSocket calls

    def getsockopt(self, option: int) -> Any:
        if option == zmq.FD:
            return self._read_fd
        if option == zmq.EVENTS:
            if not self._inbox:
                self._clear_signal()  # as ZeroMQ's: asking for the events resets the descriptor
            return (zmq.POLLIN if self._inbox else 0) | zmq.POLLOUT
        if option == zmq.LAST_ENDPOINT:
            return self.address.encode()
        raise zmq.ZMQError(errno.EINVAL)

    def recv_multipart(self, flags: int = 0, copy: bool = True) -> list[Any]:
        if self.closed:
            raise zmq.ZMQError(zmq.ENOTSOCK)
        if not self._inbox:
            self._clear_signal()
            raise zmq.Again()
        connection, frames = self._inbox.popleft()
        if copy:
            return list(frames)
        received = []
        for data in frames:
            frame = MemoryFrame(data)
            frame.connection = connection
            received.append(frame)
        return received

    def send_multipart(self, frames: Sequence[Any], flags: int = 0, copy: bool = True) -> None:
        if self.closed:
            raise zmq.ZMQError(zmq.ENOTSOCK)
        if self.severed:
            return
        self._send([_as_bytes(frame) for frame in frames])

    def close(self, linger: int | None = None) -> None:
        if self.closed:
            return
        self._sever()
        self.closed = True
        os.close(self._read_fd)
        os.close(self._write_fd)

    # ------------------------------------------------------------ kinds fill these in

    def _send(self, frames: list[bytes]) -> None:
        raise zmq.ZMQError(zmq.ENOTSUP)

    def _sever(self) -> None:
        self.severed = True
        self._inbox.clear()

    # ------------------------------------------------------------ delivery

    def _arrive(self, connection: int, frames: list[bytes]) -> None:
        if self.severed:
            return
        self._inbox.append((connection, frames))
        if not self._signalled:
            self._signalled = True
            os.write(self._write_fd, b"x")

    def _clear_signal(self) -> None:
        if self._signalled:
            self._signalled = False
            try:
                os.read(self._read_fd, 4096)
            except BlockingIOError:
                pass

    def _event(self, event: int, connection: int) -> None:
        for monitor in self.monitors:
            monitor.report(event, connection, self.address)


class MemoryMonitor(MemorySocket):
    """A socket's connection events, in ZeroMQ's monitor format (read with `zmq_async.watch_events`)."""

    def __init__(self, watched: MemorySocket, events: int) -> None:
        super().__init__(watched.network, zmq.PAIR, "inproc://monitor", f"monitor of {watched.name}")
        self._watched = watched
        self._events = events
        watched.monitors.append(self)

    def report(self, event: int, value: int, endpoint: str) -> None:
        if event & self._events:
            self._arrive(-1, [struct.pack("=hi", event, value), endpoint.encode()])

    def _sever(self) -> None:
        super()._sever()
        if self in self._watched.monitors:
            self._watched.monitors.remove(self)


class MemoryRouter(MemorySocket):
    def __init__(self, network: MemoryNetwork, address: str, mandatory: bool) -> None:
        super().__init__(network, zmq.ROUTER, address, f"router@{address}")
        self.mandatory = mandatory
        self.routes: dict[bytes, MemoryDealer] = {}  #: identity -> the connection that receives for it

    def attach(self, dealer: MemoryDealer) -> None:
        self.routes[dealer.identity] = dealer  # handover: the newest connection of an identity receives

    def detach(self, dealer: MemoryDealer, connection: int) -> None:
        if self.routes.get(dealer.identity) is dealer:
            del self.routes[dealer.identity]
        self._event(zmq.EVENT_DISCONNECTED, connection)

    def deliver(self, dealer: MemoryDealer, frames: list[bytes]) -> None:
        self.network.record(dealer.name, self.name, frames)
        self._arrive(dealer.connection, [dealer.identity, *frames])

    def _send(self, frames: list[bytes]) -> None:
        identity, *body = frames
        dealer = self.routes.get(identity)
        if dealer is None:
            if self.mandatory:
                raise zmq.ZMQError(errno.EHOSTUNREACH)
            return
        self.network.record(self.name, dealer.name, body)
        dealer._arrive(dealer.connection, body)

    def _sever(self) -> None:
        if not self.severed:
            self.network.unbind(self)
        super()._sever()


class MemoryDealer(MemorySocket):
    def __init__(self, network: MemoryNetwork, address: str, identity: bytes) -> None:
        super().__init__(network, zmq.DEALER, address, identity.decode(errors="replace"))
        self.identity = identity
        self.router: MemoryRouter | None = None
        self.connection = -1
        self._waiting: list[list[bytes]] = []  #: sent while no ROUTER was bound at the address
        #: while cut: (towards the router, from it) what was sent on the silent connection, in order
        self.cut_off: tuple[list[list[bytes]], list[list[bytes]]] | None = None

    def connect(self, router: MemoryRouter, connection: int) -> None:
        self.router, self.connection = router, connection
        router.attach(self)
        self._event(zmq.EVENT_CONNECTED, connection)
        waiting, self._waiting = self._waiting, []
        for frames in waiting:
            router.deliver(self, frames)

    def disconnect(self) -> None:
        """The ROUTER went away: what is sent from now on waits for the next one."""
        if self.router is not None:
            self.router = None
            self._event(zmq.EVENT_DISCONNECTED, self.connection)

    def _send(self, frames: list[bytes]) -> None:
        if self.cut_off is not None and self.router is not None:
            self.cut_off[0].append(frames)
        elif self.router is None:
            self._waiting.append(frames)
        else:
            self.router.deliver(self, frames)

    def _arrive(self, connection: int, frames: list[bytes]) -> None:
        if self.cut_off is not None:
            self.cut_off[1].append(frames)
        else:
            super()._arrive(connection, frames)

    def heal(self) -> None:
        """The path is back: what was sent on the silent connection arrives now, in order."""
        held, self.cut_off = self.cut_off, None
        if held is None:
            return
        towards, back = held
        for frames in back:
            super()._arrive(self.connection, frames)
        if self.router is not None:
            for frames in towards:
                self.router.deliver(self, frames)

    def move(self, connection: int) -> None:
        """The silent connection is dead (what it carried is lost) and closes; a new one to the same ROUTER
        takes over the identity."""
        self.cut_off = None
        router = self.router
        if router is None:
            return
        router.detach(self, self.connection)
        self._event(zmq.EVENT_DISCONNECTED, self.connection)
        self.connect(router, connection)

    def _sever(self) -> None:
        if not self.severed:
            self.network.hang_up(self)
            if self.router is not None:
                self.router.detach(self, self.connection)
                self.router = None
        super()._sever()


class MemoryPublisher(MemorySocket):
    """A PUB; with `watch_subscriptions`, an XPUB: a topic's first subscription and its last one's end are read
    from it (b"\\x01" + topic, b"\\x00" + topic)."""

    def __init__(self, network: MemoryNetwork, address: str, watch_subscriptions: bool = False) -> None:
        super().__init__(network, zmq.XPUB if watch_subscriptions else zmq.PUB, address, f"publisher@{address}")
        self.subscribers: list[MemorySubscriber] = []
        self.watch_subscriptions = watch_subscriptions

    def add_subscriber(self, subscriber: MemorySubscriber) -> None:
        self._subscriptions(subscriber, b"\x01")
        self.subscribers.append(subscriber)

    def remove_subscriber(self, subscriber: MemorySubscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)
            self._subscriptions(subscriber, b"\x00")

    def _subscriptions(self, subscriber: MemorySubscriber, kind: bytes) -> None:
        """What an XPUB passes on for the subscriber's topics: those no other subscriber has."""
        if not self.watch_subscriptions:
            return
        others = {topic for other in self.subscribers if other is not subscriber for topic in other.topics}
        for topic in dict.fromkeys(subscriber.topics):
            if topic not in others:
                self._arrive(-1, [kind + topic])

    def _send(self, frames: list[bytes]) -> None:
        for subscriber in self.subscribers:
            if any(frames[0].startswith(topic) for topic in subscriber.topics):
                subscriber._arrive(-1, frames)

    def _sever(self) -> None:
        if not self.severed:
            self.network.unbind(self)
        super()._sever()


class MemorySubscriber(MemorySocket):
    def __init__(self, network: MemoryNetwork, address: str, topics: Sequence[bytes]) -> None:
        super().__init__(network, zmq.SUB, address, f"subscriber@{address}")
        self.topics = tuple(topics)

    def _sever(self) -> None:
        if not self.severed:
            self.network.hang_up(self)
        super()._sever()


class MemorySockets:
    """One component's sockets on a MemoryNetwork: the `SocketFactory` interface the shells use."""

    def __init__(self, network: MemoryNetwork, security: TransportSecurity | None = None) -> None:
        self.network = network
        self.security = security
        self.sockets: list[MemorySocket] = []

    def router(self, address: str, *, mandatory: bool = False, handover: bool = False) -> Any:
        return self._keep(self.network.bind(MemoryRouter(self.network, address, mandatory)))

    def publisher(self, address: str, high_water_mark: int = 0, watch_subscriptions: bool = False) -> Any:
        return self._keep(self.network.bind(MemoryPublisher(self.network, address, watch_subscriptions)))

    def dealer(
        self,
        address: str,
        identity: bytes | None = None,
        immediate: bool = False,
        heartbeat: bool = False,
        events: int = 0,
    ) -> Any:
        identity = identity if identity is not None else self.network.new_identity()
        return self._keep(self.network.connect(MemoryDealer(self.network, address, identity)))

    def subscriber(
        self, address: str, topics: Sequence[bytes] = (b"",), high_water_mark: int = 0, events: int = 0
    ) -> Any:
        return self._keep(self.network.connect(MemorySubscriber(self.network, address, topics)))

    def event_monitor(self, sock: Any, events: int) -> Any:
        return self._keep(MemoryMonitor(sock, events))

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()

    def _keep(self, sock: MemorySocket) -> MemorySocket:
        self.sockets.append(sock)
        return sock


class MemoryNetwork:
    """Addresses and the sockets bound and connected to them."""

    def __init__(self) -> None:
        self._bound: dict[str, MemorySocket] = {}
        self._connected: dict[str, list[MemorySocket]] = collections.defaultdict(list)
        self._connections = itertools.count(1000)
        self._identities = itertools.count(1)
        self.traffic: list[Delivery] = []

    def sockets(self, security: TransportSecurity | None = None) -> MemorySockets:
        """A component's socket factory (pass it where a `SocketFactory` goes)."""
        return MemorySockets(self, security)

    def crash(self, sockets: MemorySockets) -> None:
        """The component dies at once: its sockets are cut off (its peers see their connections close)."""
        for sock in sockets.sockets:
            sock._sever()

    def cut(self, sockets: MemorySockets) -> None:
        """A component's connections to servers go silent both ways, with no event (its network is cut)."""
        for sock in sockets.sockets:
            if isinstance(sock, MemoryDealer) and sock.router is not None and sock.cut_off is None:
                sock.cut_off = ([], [])

    def heal(self, sockets: MemorySockets) -> None:
        """The cut ends with the connections alive: what was sent meanwhile arrives."""
        for sock in sockets.sockets:
            if isinstance(sock, MemoryDealer):
                sock.heal()

    def move(self, sockets: MemorySockets) -> None:
        """The cut ends with the connections dead: they close, losing what they carried, and new ones are made."""
        for sock in sockets.sockets:
            if isinstance(sock, MemoryDealer) and sock.cut_off is not None:
                sock.move(next(self._connections))

    def is_bound(self, address: str) -> bool:
        return address in self._bound

    def record(self, sender: str, receiver: str, frames: list[bytes]) -> None:
        self.traffic.append(Delivery(sender, receiver, tuple(frames)))

    # ------------------------------------------------------------ the sockets' side

    def bind(self, sock: MemorySocket) -> MemorySocket:
        if sock.address in self._bound:
            sock.close()
            raise zmq.ZMQError(errno.EADDRINUSE)
        self._bound[sock.address] = sock
        for peer in self._connected[sock.address]:
            self._join(sock, peer)
        return sock

    def unbind(self, sock: MemorySocket) -> None:
        if self._bound.get(sock.address) is not sock:
            return
        del self._bound[sock.address]
        for peer in self._connected[sock.address]:
            if isinstance(peer, MemoryDealer) and peer.router is sock:
                sock._event(zmq.EVENT_DISCONNECTED, peer.connection)
                peer.disconnect()
            elif isinstance(peer, MemorySubscriber) and isinstance(sock, MemoryPublisher):
                sock.remove_subscriber(peer)

    def connect(self, sock: MemorySocket) -> MemorySocket:
        self._connected[sock.address].append(sock)
        bound = self._bound.get(sock.address)
        if bound is not None:
            self._join(bound, sock)
        return sock

    def hang_up(self, sock: MemorySocket) -> None:
        connected = self._connected[sock.address]
        if sock in connected:
            connected.remove(sock)
        bound = self._bound.get(sock.address)
        if isinstance(bound, MemoryPublisher) and isinstance(sock, MemorySubscriber):
            bound.remove_subscriber(sock)

    def new_identity(self) -> bytes:
        return b"\x00" + next(self._identities).to_bytes(4, "big")

    def _join(self, bound: MemorySocket, peer: MemorySocket) -> None:
        if isinstance(bound, MemoryRouter) and isinstance(peer, MemoryDealer):
            peer.connect(bound, next(self._connections))
        elif isinstance(bound, MemoryPublisher) and isinstance(peer, MemorySubscriber):
            bound.add_subscriber(peer)


def _as_bytes(frame: Any) -> bytes:
    if isinstance(frame, bytes):
        return frame
    if isinstance(frame, zmq.Frame):
        return frame.bytes
    return bytes(frame)
