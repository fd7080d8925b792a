"""A host cache's CURVE security: it serves with the key pair of the workers that use it, connects upstream as those
workers do, and lets in that public key (its processors, other hosts' caches) and the keys its upstream storage server
lets in as clients (a client reads the results this cache holds straight from here: host_ledger S5; the service lets a
client do nothing else). Its processors connect to it with their worker's key pair and that same public key as the
server's (`HelloReply.objectStorageServerKey`); a client learns that key from the storage server with the holder's
address (`ObjectSource.serverKey`). A peer with any other key finishes no handshake: it gets nothing.

Which keys are clients' is the upstream's to say, not this host's: the authorised folder lives with the storage server
and changes there (a key added, a key revoked). So the ZAP handler asks the upstream about a key that is not the
workers' (`ClientKey`, on a connection of its own) at each handshake, and the answer names the client ids the server
bound to that key (its clients' sessions, which connected there first): a client here may claim only those (`owners_of`,
the service's hello check), so that a key cannot read another client's results here by claiming that client's id where
that client never came. A client keeps its connections to a holder (up to four), so that is a few questions per client
and host, not one per read; a key the upstream refused is refused without asking for `KEY_ANSWER_SECONDS`. Why not have
the server hand the cache every client key: the folder may hold many keys, of which a host sees a few, and the list
would be stale the moment a key is revoked or a client comes. An upstream that cannot be asked (unreachable, or older:
no answer) lets no client in.
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
from scaler.protocol.storage_messages import ClientKey, KeyOwners, StorageStatus
from scaler.security.curve import CurveSecurity, StoppingAuthenticator
from scaler.security.roles import CLIENT, WORKER

logger = logging.getLogger(__name__)

#: How long the upstream's refusal of a key is taken as true (a later handshake of that key asks again).
KEY_ANSWER_SECONDS = 10.0
#: How long the ZAP handler waits for the upstream's answer about a key (it holds other handshakes meanwhile).
ASK_SECONDS = 5.0
#: Keys whose answers are remembered at most (the oldest forgotten beyond).
MAX_KEYS = 4096


#: The upstream's answer about a key: the client ids bound to it (a client's key), or None (not a client's).
Owners = frozenset[bytes] | None


class ClientKeys:
    """Which keys (not the workers') a cache lets in as clients, and the client ids each may claim, as the upstream
    answered (pure: the caller brings the time and the answers)."""

    def __init__(self, answer_seconds: float = KEY_ANSWER_SECONDS, max_keys: int = MAX_KEYS) -> None:
        self._answers: dict[bytes, tuple[Owners, float]] = {}  #: key -> (its owners, when answered)
        self._answer_seconds = answer_seconds
        self._max_keys = max_keys

    def refused_lately(self, key: bytes, now: float) -> bool:
        """At a handshake: whether the upstream said within `answer_seconds` that the key is not a client's (False:
        ask it). A client's key is asked about at each handshake: the ids bound to it change as its sessions come."""
        answer = self._answers.get(key)
        return answer is not None and answer[0] is None and now - answer[1] < self._answer_seconds

    def answered(self, key: bytes, owners: Owners, now: float) -> None:
        self._answers.pop(key, None)
        self._answers[key] = (owners, now)
        while len(self._answers) > self._max_keys:
            del self._answers[next(iter(self._answers))]

    def owners_of(self, key: bytes) -> Owners:
        """What the last answer said of the key (the handshake of the connection asking asked it): None, not a
        client's (or never asked)."""
        answer = self._answers.get(key)
        return None if answer is None else answer[0]


class CacheSecurity:
    """The `TransportSecurity` of a host cache, from its workers' `CurveSecurity`. `ask_upstream(key)`: the client ids
    the upstream storage server bound to that key, None when it does not let the key in as a client (raises when it
    cannot be asked); no `ask_upstream`: no client is let in."""

    def __init__(
        self,
        workers: CurveSecurity,
        ask_upstream: Callable[[bytes], Owners] | None = None,
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
            return frozenset({CLIENT}) if self._clients.owners_of(public_key) is not None else frozenset()

    def owners_of(self, public_key: bytes) -> frozenset[bytes]:
        """The client ids a client's key may claim here (`StorageService`'s `client_owners`)."""
        with self._lock:
            return self._clients.owners_of(public_key) or frozenset()

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
            if self._clients.refused_lately(public_key, self._clock()):
                return False
        try:
            owners = self._ask_upstream(public_key)
        except Exception as error:  # unreachable, or an older server: no client is let in
            logger.info("could not ask the storage server about public key %s: %s", public_key.decode(), error)
            return False
        with self._lock:
            self._clients.answered(public_key, owners, self._clock())
        return owners is not None


class UpstreamKeys:
    """`CacheSecurity.ask_upstream`: asks the upstream storage server about a key, on a connection of its own (made at
    the first question, on the ZAP handler's thread that asks them all, with the workers' keys)."""

    def __init__(self, address: str, workers: CurveSecurity, timeout_seconds: float = ASK_SECONDS) -> None:
        self._address = address
        self._workers = workers
        self._timeout_seconds = timeout_seconds
        self._connection: Any = None

    def __call__(self, public_key: bytes) -> Owners:
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
        if answer.reply.status is StorageStatus.REFUSED:
            return None  # not a client's key
        return frozenset(reply_value(answer.reply, KeyOwners, self._address).owner_ids)
