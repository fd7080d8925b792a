"""A TCP forwarder: what makes a cloud scheduler answer at the address the launcher file names.

    python -m scaler.cluster.forwarder '[[listening fd, target host, target port], ...]' ['<trusted CA file>']
    python -m scaler.cluster.forwarder '[[listening fd, "wss://HOST:PORT/PATH"], ...]' ['<trusted CA file>']

The launcher binds the file's addresses (scheduler, object storage, monitor) itself and passes the listening
sockets on; each connection accepted here is joined to a new connection to the target, and bytes are copied both
ways until either side closes. Every connection goes out from this machine: nothing in the cloud connects to it.
What crosses is CURVE traffic, encrypted and authenticated end to end between the client and the scheduler: the
forwarder sees only ciphertext.

A target that cannot be reached closes the accepted connection (ZeroMQ peers connect again by themselves, several
times a second each); it is said once when the target stops answering and once when it answers again
(`RouteHealth`), and while it is down the connections accepted are closed without trying it again, each next try
after a delay that doubles up to `RETRY_CAP_SECONDS`. SIGTERM ends it.

A route to a tunnel address (`[scaler] hub_address`: `wss://`, `tls://`) is carried by this process's tunnel relay
instead (`scaler.io.tunnel`): each connection accepted is joined to a new TLS or WebSocket connection to the hub,
through the HTTP proxy the environment names, the hub's certificate checked against the system's authorities and the
CA file given; the bytes inside are the same CURVE traffic.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10.0
CHUNK = 256 * 1024
#: While a target does not answer, the first retry waits this long, each next one twice as long, up to the cap.
RETRY_FIRST_SECONDS = 0.25
RETRY_CAP_SECONDS = 4.0


class RouteHealth:
    """Whether one target answers, told once per change: `failed` and `answered` return the line to log when the
    state changes (None otherwise); `should_try` says whether a new connection tries the target now or is closed
    at once (while it is down, until the next retry time). Times are given (monotonic seconds)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._retry_at = 0.0
        self._delay = RETRY_FIRST_SECONDS
        self._refused = 0  #: connections closed while down (tried or not)

    def should_try(self, now: float) -> bool:
        with self._lock:
            if self._down_since is None or now >= self._retry_at:
                return True
            self._refused += 1
            return False

    def failed(self, now: float, error: str) -> str | None:
        with self._lock:
            self._refused += 1
            if self._down_since is not None:
                self._delay = min(RETRY_CAP_SECONDS, self._delay * 2)
                self._retry_at = now + self._delay
                return None
            self._down_since, self._retry_at = now, now + self._delay
            return (
                f"cannot reach {self.target} ({error}): closing the connections made to it until it answers (tried "
                f"again after {RETRY_FIRST_SECONDS:g} s, then less often, up to every {RETRY_CAP_SECONDS:g} s)"
            )

    def answered(self, now: float) -> str | None:
        with self._lock:
            if self._down_since is None:
                return None
            line = (
                f"{self.target} answers again after {now - self._down_since:.1f} s "
                f"({self._refused} connection(s) closed meanwhile)"
            )
            self._down_since, self._delay, self._refused = None, RETRY_FIRST_SECONDS, 0
            return line


def serve(routes: list[tuple[socket.socket, str, int]]) -> None:
    for listener, host, port in routes:
        health = RouteHealth(f"{host}:{port}")
        threading.Thread(target=_accept, args=(listener, host, port, health), daemon=True).start()


def _accept(listener: socket.socket, host: str, port: int, health: RouteHealth) -> None:
    while True:
        try:
            accepted, _ = listener.accept()
        except OSError:
            return
        if not health.should_try(time.monotonic()):
            accepted.close()
            continue
        threading.Thread(target=_join, args=(accepted, host, port, health), daemon=True).start()


def _join(accepted: socket.socket, host: str, port: int, health: RouteHealth) -> None:
    try:
        upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS)
    except OSError as error:
        line = health.failed(time.monotonic(), str(error))
        if line is not None:
            logger.warning("%s", line)
        accepted.close()
        return
    line = health.answered(time.monotonic())
    if line is not None:
        logger.warning("%s", line)
    upstream.settimeout(None)
    for sock in (accepted, upstream):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    threading.Thread(target=_copy, args=(upstream, accepted), daemon=True).start()
    _copy(accepted, upstream)


def _copy(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            data = source.recv(CHUNK)
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
            sock.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s forwarder %(levelname)s %(message)s")
    routes: list[tuple[socket.socket, str, int]] = []
    tunnels: list[tuple[socket.socket, str]] = []
    for route in json.loads(sys.argv[1]):
        listener = socket.socket(fileno=int(route[0]))
        if len(route) == 2:
            tunnels.append((listener, str(route[1])))
        else:
            routes.append((listener, str(route[1]), int(route[2])))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    serve(routes)
    if tunnels:
        _serve_tunnels(tunnels, sys.argv[2] if len(sys.argv) > 2 else "")
    while not stop.wait(1.0):  # a bounded wait: the signal's handler runs within a second whatever the threads do
        pass
    logging.shutdown()
    os._exit(0)  # the copying threads are daemons blocked in sockets: nothing of theirs needs finishing


def _serve_tunnels(tunnels: list[tuple[socket.socket, str]], ca_file: str) -> None:
    from scaler.io.address import parse_address
    from scaler.io.tunnel.relay import relay
    from scaler.io.tunnel.tls import trust_ca_file

    if ca_file:
        trust_ca_file(ca_file)
    for listener, target in tunnels:
        listener.setblocking(False)
        relay().forward(listener, parse_address(target))


if __name__ == "__main__":
    main()
