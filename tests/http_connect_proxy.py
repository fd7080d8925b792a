"""A small HTTP proxy that only tunnels (CONNECT), as a corporate proxy does for HTTPS: it counts the tunnels it
opened by target, and answers `refuse_with` (e.g. "403 Forbidden") instead when the test sets it. Threads, on
127.0.0.1, stopped with the `with` block."""

from __future__ import annotations

import socket
import threading
from collections import Counter
from types import TracebackType


class ConnectProxy:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.tunnels: Counter[str] = Counter()  #: tunnels opened, by "HOST:PORT"
        self.refused: Counter[str] = Counter()
        self.refuse_with: str | None = None
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="connect-proxy", daemon=True)
        self._thread.start()

    def __enter__(self) -> ConnectProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            self._tunnel(client)
        except OSError:  # the proxy stopped, or a side went away
            client.close()

    def _tunnel(self, client: socket.socket) -> None:
        self._keep(client)
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(4096)
            if not data:
                client.close()
                return
            head += data
        method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        if self.refuse_with is not None:
            with self._lock:
                self.refused[target] += 1
            client.sendall(f"HTTP/1.1 {self.refuse_with}\r\nContent-Length: 0\r\n\r\n".encode())
            client.close()
            return
        host, _, port = target.rpartition(":")
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        upstream.settimeout(None)
        self._keep(upstream)
        with self._lock:
            self.tunnels[target] += 1
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        threading.Thread(target=_copy, args=(upstream, client), daemon=True).start()
        _copy(client, upstream)

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)


def _copy(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
