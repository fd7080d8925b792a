"""A host cache's CURVE security: it serves with the key pair of the workers that use it, connects upstream as those
workers do, and lets in that public key (its processors, other hosts' caches) and the keys its upstream storage server
lets in as clients (a client reads the results this cache holds straight from here: host_ledger S5; the service lets a
client do nothing else). Its processors connect to it with their worker's key pair and that same public key as the
server's (`HelloReply.objectStorageServerKey`); a client learns that key from the storage server with the holder's
address (`ObjectSource.serverKey`). A peer with any other key finishes no handshake: it gets nothing.

Which keys are clients' is the upstream's to say, not this host's: the authorised folder lives with the storage server
and changes there (a key added, a key revoked). So the ZAP handler asks the upstream about a key that is not the
workers' (`ClientKey`, on a connection of its own), once per key, and remembers the answer for `KEY_ANSWER_SECONDS`:
a connection made later asks again, so a key revoked at the server is refused here from then on. Why not have the
server hand the cache every client key: the folder may hold many keys, of which a host sees a few, and the list would
be stale the moment a key is revoked. An upstream that cannot be asked (unreachable, or older: no answer) lets no client
in.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from scaler.io.sockets import Closeable, Socket
from scaler.object_storage.client_core import reply_value
from scaler.protocol.storage_messages import ClientKey
from scaler.security.curve import CurveSecurity, StoppingAuthenticator
from scaler.security.roles import CLIENT, WORKER

logger = logging.getLogger(__name__)

#: How long the upstream's answer about a client key is taken as true (a later handshake asks again).
KEY_ANSWER_SECONDS = 10.0
#: How long the ZAP handler waits for the upstream's answer about a key (it holds other handshakes meanwhile).
ASK_SECONDS = 5.0
#: Keys whose answers are remembered at most (the oldest forgotten beyond).
MAX_KEYS = 4096


class ClientKeys:
    """Which keys (not the workers') a cache lets in as clients, as the upstream answered (pure: the caller brings the
    time and the answers)."""

    def __init__(self, answer_seconds: float = KEY_ANSWER_SECONDS, max_keys: int = MAX_KEYS) -> None:
        self._answers: dict[bytes, tuple[bool, float]] = {}  #: key -> (a client, when answered)
        self._answer_seconds = answer_seconds
        self._max_keys = max_keys

    def known(self, key: bytes, now: float) -> bool | None:
        """At a handshake: whether the key is a client's, as answered within `answer_seconds`; None: ask upstream."""
        answer = self._answers.get(key)
        if answer is None or now - answer[1] >= self._answer_seconds:
            return None
        return answer[0]

    def answered(self, key: bytes, client: bool, now: float) -> None:
        self._answers.pop(key, None)
        self._answers[key] = (client, now)
        while len(self._answers) > self._max_keys:
            del self._answers[next(iter(self._answers))]

    def is_client(self, key: bytes) -> bool:
        """On an open connection (each request): what the last answer said (the connection's handshake asked)."""
        answer = self._answers.get(key)
        return answer is not None and answer[0]


class CacheSecurity:
    """The `TransportSecurity` of a host cache, from its workers' `CurveSecurity`. `ask_upstream(key)`: whether the
    upstream storage server lets that key in as a client (raises when it cannot be asked); None: no client is let in."""

    def __init__(
        self,
        workers: CurveSecurity,
        ask_upstream: Callable[[bytes], bool] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.workers = workers
        self._ask_upstream = ask_upstream
        self._clock = clock or time.monotonic
        self._clients = ClientKeys()
        self._lock = threading.Lock()
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
        if public_key == self.workers.public:
            return frozenset({WORKER})
        with self._lock:
            return frozenset({CLIENT}) if self._clients.is_client(public_key) else frozenset()

    def callback(self, domain: str, public_key: bytes) -> bool:
        """The ZAP handler's question (on its thread): the workers' own key, or a key the upstream lets in as a
        client."""
        if public_key == self.workers.public:
            return True
        if self._is_client(public_key):
            return True
        if public_key not in self._refused:  # once per key
            self._refused.add(public_key)
            logger.warning(
                "refused a connection: public key %s is neither the key of this host cache's workers nor one its "
                "storage server lets in as a client", public_key.decode(),
            )  # fmt: skip
        return False

    def _is_client(self, public_key: bytes) -> bool:
        if self._ask_upstream is None:
            return False
        with self._lock:
            known = self._clients.known(public_key, self._clock())
        if known is not None:
            return known
        try:
            client = bool(self._ask_upstream(public_key))
        except Exception as error:  # unreachable, or an older server: no client is let in
            logger.info("could not ask the storage server about public key %s: %s", public_key.decode(), error)
            return False
        with self._lock:
            self._clients.answered(public_key, client, self._clock())
        return client


class UpstreamKeys:
    """`CacheSecurity.ask_upstream`: asks the upstream storage server about a key, on a connection of its own (made at
    the first question, on the ZAP handler's thread that asks them all, with the workers' keys)."""

    def __init__(self, address: str, workers: CurveSecurity, timeout_seconds: float = ASK_SECONDS) -> None:
        self._address = address
        self._workers = workers
        self._timeout_seconds = timeout_seconds
        self._connection: Any = None

    def __call__(self, public_key: bytes) -> bool:
        from scaler.object_storage.connection import ObjectStorageConnection

        if self._connection is None:
            self._connection = ObjectStorageConnection(
                self._address, role="cache", timeout_seconds=self._timeout_seconds, security=self._workers,
                map_local=False,
            )  # fmt: skip
        try:
            answer = self._connection.call(ClientKey(public_key.decode()))
        except BaseException:
            self._connection.close()
            self._connection = None
            raise
        return bool(reply_value(answer.reply, bool, self._address))
