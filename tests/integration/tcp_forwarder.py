"""A TCP port forwarder on 127.0.0.1, standing in for a NAT or a load balancer: connections to its port reach
the target port; it counts the connections it carried."""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class TcpForwarder:
    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
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

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                inbound, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            try:
                outbound = socket.create_connection(("127.0.0.1", self._target_port), timeout=5)
            except OSError:
                inbound.close()
                continue
            self.connections += 1
            self._sockets += [inbound, outbound]
            for source, sink in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        source.settimeout(None)
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
