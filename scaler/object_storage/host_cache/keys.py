"""A host cache's CURVE security: it serves with the key pair of the workers that use it and lets in only that key
(one cache per host, user, upstream and worker key: place.cache_home), and it connects upstream as those workers do.
Its processors connect to it with their worker's key pair and that same public key as the server's
(`HelloReply.objectStorageServerKey`). A peer with any other key finishes no handshake: it gets nothing."""

from __future__ import annotations

import logging
from typing import Any

import zmq

from scaler.io.sockets import Closeable, Socket
from scaler.security.curve import CurveSecurity, StoppingAuthenticator
from scaler.security.roles import WORKER

logger = logging.getLogger(__name__)


class CacheSecurity:
    """The `TransportSecurity` of a host cache, from its workers' `CurveSecurity`."""

    def __init__(self, workers: CurveSecurity) -> None:
        self.workers = workers
        self._refused: set[bytes] = set()

    def secure_server(self, sock: Socket) -> None:
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = (
            self.workers.secret, self.workers.public, True
        )  # fmt: skip

    def secure_client(self, sock: Socket) -> None:
        self.workers.secure_client(sock)

    def start_authenticator(self, context: zmq.Context[Any]) -> Closeable:
        from zmq.auth.thread import ThreadAuthenticator

        authenticator = ThreadAuthenticator(context, log=logging.getLogger("scaler.security.curve.zap"))
        authenticator.start()
        authenticator.configure_curve_callback("*", credentials_provider=self)
        return StoppingAuthenticator(authenticator)

    def peer_roles(self) -> CacheSecurity:
        return self

    def roles_of(self, public_key: bytes) -> frozenset[str]:
        return frozenset({WORKER}) if public_key == self.workers.public else frozenset()

    def callback(self, domain: str, public_key: bytes) -> bool:
        """The ZAP handler's question: only the workers' own key is let in."""
        if public_key == self.workers.public:
            return True
        if public_key not in self._refused:  # once per key
            self._refused.add(public_key)
            logger.warning("refused a connection: public key %s is not the key of this host cache's workers",
                           public_key.decode())  # fmt: skip
        return False
