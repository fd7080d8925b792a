"""A TCP port forwarder on 127.0.0.1, standing in for a NAT or a load balancer: connections to its port reach
the target port; it counts the connections it carried.

`move(source)` stands in for a laptop that changed networks: the connections it carries go dead without closing
(nothing crosses them any more, as when the old network is gone), and new ones reach the target from another source
address (`source`, e.g. 127.0.0.2: any 127/8 address is this machine's).
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from types import TracebackType


class TcpForwarder:
    def __init__(self, target_port: int, source: str = "127.0.0.1") -> None:
        self._target_port = target_port
        self._source = source
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self.by_source: Counter[str] = Counter()  #: connections made to the target, by their source address
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._dead: list[threading.Event] = []  #: per connection: set when it went dead (move)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="tcp-forwarder", daemon=True)

    def __enter__(self) -> TcpForwarder:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        for sock in self._sockets:
            sock.close()

    def move(self, source: str) -> None:
        """The connections carried so far go dead (nothing crosses them; they stay open); new ones come from
        `source`."""
        with self._lock:
            self._source = source
            for dead in self._dead:
                dead.set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                inbound, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                source = self._source
            try:
                outbound = socket.create_connection(("127.0.0.1", self._target_port), 5, (source, 0))
            except OSError:
                inbound.close()
                continue
            dead = threading.Event()
            with self._lock:
                self.connections += 1
                self.by_source[source] += 1
                self._sockets += [inbound, outbound]
                self._dead.append(dead)
            for from_, to in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=_pump, args=(from_, to, dead), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket, dead: threading.Event) -> None:
    try:
        source.settimeout(0.2)
        while not dead.is_set():
            try:
                data = source.recv(65536)
            except TimeoutError:
                continue
            if not data:
                break
            if dead.is_set():
                return  # the old network is gone: what was on its way is lost, and nothing more crosses
            sink.sendall(data)
    except OSError:
        pass
    else:
        if dead.is_set():
            return  # left open: a dead path does not close
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass
