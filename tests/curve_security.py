"""A ZeroMQ CURVE `TransportSecurity` for tests: it shows that the socket factory's seam is enough for
CURVE (keys on the sockets, one ZAP handler per context, nothing in any component). Issue 11 ships the real
one in `scaler/io/`; this one only serves the seam's tests.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import zmq
import zmq.auth

from scaler.io.sockets import Closeable, Socket
from scaler.security.curve import StoppingAuthenticator


class CurveForTheSeam:
    """Servers: `curve_server` with the server's keys, peers checked against `authorized`. Clients: their own
    keys and the server's public key. Key bytes only, so it crosses forks (a worker's reaches its processors)."""

    def __init__(self, keys: tuple[bytes, bytes], server_public: bytes, authorized: frozenset[bytes] = frozenset()):
        self.public, self.secret = keys
        self.server_public = server_public
        self.authorized = authorized
        self.refused: list[bytes] = []
        self.refusal_seen = threading.Event()

    def secure_server(self, sock: Socket) -> None:
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = self.secret, self.public, True

    def secure_client(self, sock: Socket) -> None:
        sock.curve_secretkey, sock.curve_publickey, sock.curve_serverkey = self.secret, self.public, self.server_public

    def start_authenticator(self, context: zmq.Context[Any]) -> Closeable:
        from zmq.auth.thread import ThreadAuthenticator

        authenticator = ThreadAuthenticator(context)
        authenticator.start()
        authenticator.configure_curve_callback("*", credentials_provider=self)
        return StoppingAuthenticator(authenticator)

    def peer_roles(self) -> None:  # no roles here: this one only shows the handshake
        return None

    def callback(self, domain: str, public_key: bytes) -> bool:  # called by the ZAP handler for each peer
        if public_key in self.authorized:
            return True
        self.refused.append(public_key)
        self.refusal_seen.set()
        return False


def curve_keys(directory: Path, name: str) -> tuple[bytes, bytes]:
    """(public, secret) of NAME in DIRECTORY, made with pyzmq's certificate tools when missing."""
    secret_file = directory / f"{name}.key_secret"
    if not secret_file.exists():
        directory.mkdir(parents=True, exist_ok=True)
        zmq.auth.create_certificates(str(directory), name)
    public, secret = zmq.auth.load_certificate(str(secret_file))
    assert secret is not None
    return public, secret


def authorized_keys(directory: Path) -> frozenset[bytes]:
    """The public keys of every certificate in DIRECTORY."""
    return frozenset(zmq.auth.load_certificate(str(path))[0] for path in sorted(directory.glob("*.key")))
