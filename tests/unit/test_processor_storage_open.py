"""A processor opens its object storage connection as soon as its agent says where storage is, before any task asks:
a fresh processor's first task does not wait for the connection's import, socket and handshake."""

from __future__ import annotations

import socket

import pytest

from scaler.io.sockets import SocketFactory
from scaler.worker.processor.process import _Storage


@pytest.mark.timeout(60)
def test_storage_connection_opens_when_configured_not_at_first_request() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30.0)  # a bound on a failure, not a measure: the connection comes at once or never
    port = listener.getsockname()[1]
    sockets = SocketFactory()
    storage = _Storage(sockets, timeout_seconds=5.0)
    try:
        storage.configure(f"tcp://127.0.0.1:{port}", "")
        peer, _ = listener.accept()  # no request was made: only the configuration can have connected
        peer.close()
    finally:
        storage.close()
        sockets.close()
        listener.close()
