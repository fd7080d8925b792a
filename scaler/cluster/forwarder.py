"""A TCP forwarder: what makes a cloud scheduler answer at the address the launcher file names.

    python -m scaler.cluster.forwarder '[[listening fd, target host, target port], ...]'

The launcher binds the file's addresses (scheduler, object storage, monitor) itself and passes the listening
sockets on; each connection accepted here is joined to a new connection to the target, and bytes are copied both
ways until either side closes. Every connection goes out from this machine: nothing in the cloud connects to it.
What crosses is CURVE traffic, encrypted and authenticated end to end between the client and the scheduler: the
forwarder sees only ciphertext.

A target that cannot be reached closes the accepted connection (ZeroMQ peers connect again by themselves).
SIGTERM ends it.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
import threading

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10.0
CHUNK = 256 * 1024


def serve(routes: list[tuple[socket.socket, str, int]]) -> None:
    for listener, host, port in routes:
        threading.Thread(target=_accept, args=(listener, host, port), daemon=True).start()


def _accept(listener: socket.socket, host: str, port: int) -> None:
    while True:
        try:
            accepted, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_join, args=(accepted, host, port), daemon=True).start()


def _join(accepted: socket.socket, host: str, port: int) -> None:
    try:
        upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS)
    except OSError as error:
        logger.warning("cannot reach %s:%d (%s): connection closed", host, port, error)
        accepted.close()
        return
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
    routes = [(socket.socket(fileno=int(fd)), str(host), int(port)) for fd, host, port in json.loads(sys.argv[1])]
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    serve(routes)
    stop.wait()


if __name__ == "__main__":
    main()
