"""The scheduler's CURVE bookkeeping, in its shell: which key registered each peer, and what that key may do.

With CURVE on, every message carries its connection's public key (`User-Id`, set by the ZAP handler). Before a
message reaches the core:

- a hello is let through only if the key's roles allow the role it names (a client key cannot register as a
  worker or a manager: `scaler.security.roles`); the refusal is a `HelloReply(False)` naming why. A processor's link
  must come with the key its worker registered with (it speaks for that worker);
- a message on a registered identity must come with the key that registered it. A secured ROUTER has no handover,
  so a second connection naming an identity in use is not read while the first lives; a message with another
  key therefore means the registering connection ended and a stranger holds its identity: the message is
  refused and logged, and the registered peer is dropped (nothing more is sent to its identity);
- every second, `revoked()` names the registered peers whose key left the authorised folder: the shell drops
  them from the core and tells them, and their next hello is refused;
- a client's hello gets the share its key has in the folder's `sharing.toml` in place of the one it asked for,
  and at most its key's quota (`settled`; scaler/security/quotas.py), so a user cannot raise their own weight.

Refusals are logged once per key and reason, so a peer retrying cannot flood the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import zmq

from scaler.io.sockets import PeerRoles
from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, short
from scaler.security.quotas import KeySharing
from scaler.security.roles import scheduler_refusal

logger = logging.getLogger(__name__)

REVOKED = "authentication: this connection's CURVE key was revoked (removed from the authorised keys)"
TAKEN = "refused: this identity was registered with another CURVE key"
PROCESSOR_KEY = "refused: a processor's link must use the CURVE key its worker registered with"

#: Refusals remembered so each is logged once; beyond this the memory is cleared (and some are logged again).
MAX_REMEMBERED_REFUSALS = 10_000


@dataclass(frozen=True, slots=True)
class KeyRefusal:
    answer: m.Message  #: sent back on the connection the refused message came on
    owner_gone: bool = False  #: the peer that registered this identity is gone: drop it from the core


@runtime_checkable
class SharingSource(Protocol):
    """A folder of authorised keys that also says each key's share and quota (`io.curve.AuthorizedFolder`)."""

    def sharing_of(self, public_key: bytes) -> KeySharing | None: ...


def settle(info: m.ClientInfo, sharing: KeySharing) -> m.ClientInfo:
    """A client's settings once its key's are applied: the key's share; the smaller of each quota (0 means none)."""
    share = sharing.share if sharing.share is not None else info.share
    return replace(
        info,
        share=share,
        max_running_tasks=_at_most(info.max_running_tasks, sharing.max_running_tasks),
        max_workers=_at_most(info.max_workers, sharing.max_workers),
        max_cost_per_hour=sharing.max_cost_per_hour or 0.0,
        max_job_result_bytes=sharing.max_job_result_bytes or 0,
    )


def _at_most(asked: int, keys: int | None) -> int:
    """A quota the client asked for (0: none) capped by its key's (None: none)."""
    if keys is None:
        return asked
    return min(asked, keys) if asked else keys


class PeerKeys:
    def __init__(self, roles: PeerRoles, python_version: str) -> None:
        self._roles = roles
        self._python_version = python_version
        self._registered: dict[PeerID, bytes] = {}  #: peer -> the key its accepted hello came with
        self._logged: set[tuple[bytes, str]] = set()

    @staticmethod
    def key_of(frame: zmq.Frame) -> bytes | None:
        """The z85 public key of the connection a frame came on (None without authentication)."""
        try:
            user_id = frame.get("User-Id")
        except (zmq.ZMQError, ValueError, TypeError):
            return None
        return user_id.encode() if isinstance(user_id, str) and user_id else None

    def refusal(self, peer: PeerID, key: bytes | None, message: m.Message) -> KeyRefusal | None:
        """How to refuse this message, or None to let it through to the core."""
        if key is None:  # cannot happen on a CURVE socket; refuse rather than trust
            return KeyRefusal(m.ProtocolError("refused: this connection is not authenticated"))
        if isinstance(message, m.Hello):
            reason = scheduler_refusal(self._roles.roles_of(key), message.role.value)
            if reason is None and isinstance(message.info, m.ProcessorInfo):
                worker_key = self._registered.get(PeerID(message.info.worker_id))
                if worker_key is not None and worker_key != key:
                    reason = PROCESSOR_KEY
            if reason is not None:
                self._log_once(key, reason, f"refused a {message.role.value} hello from {short(peer)}")
                return KeyRefusal(m.HelloReply(False, reason, python_version=self._python_version))
            if self._registered.get(peer, key) == key:
                self._registered[peer] = key
                return None
        registered = self._registered.get(peer)
        if registered is not None and registered != key:
            # the connection that registered this identity ended and another key's connection holds it now
            # (without handover, not before): the peer that registered it is gone, and nothing more goes to it
            del self._registered[peer]
            self._log_once(key, TAKEN, f"a message for {short(peer)} came on another connection")
            return KeyRefusal(m.ProtocolError(TAKEN), owner_gone=True)
        return None

    def settled(self, key: bytes | None, message: m.Message) -> m.Message:
        """The message as the core should see it: a client's hello with its key's share and quota applied, and its key
        as the owner of its jobs; a worker's hello with its key (clients inside its tasks connect with it)."""
        if key is None or not isinstance(message, m.Hello):
            return message
        if isinstance(message.info, m.WorkerInfo):
            return replace(message, info=replace(message.info, owner_key=key.decode()))
        if not isinstance(message.info, m.ClientInfo):
            return message
        sharing = self._roles.sharing_of(key) if isinstance(self._roles, SharingSource) else None
        info = message.info if sharing is None else settle(message.info, sharing)
        return replace(message, info=replace(info, owner_key=key.decode()))  # the key owns the client's jobs

    def revoked(self, registered: Iterable[PeerID]) -> list[PeerID]:
        """Peers still registered whose key is no longer authorised; forgets peers the core has dropped."""
        alive = set(registered)
        for peer in [peer for peer in self._registered if peer not in alive]:
            del self._registered[peer]
        gone = [peer for peer, key in self._registered.items() if not self._roles.roles_of(key)]
        for peer in gone:
            key = self._registered.pop(peer)
            logger.warning("%s: public key %s was revoked; dropping it", short(peer), key.decode())
        return gone

    def _log_once(self, key: bytes, reason: str, what: str) -> None:
        if (key, reason) in self._logged:
            return
        if len(self._logged) >= MAX_REMEMBERED_REFUSALS:
            self._logged.clear()
        self._logged.add((key, reason))
        logger.warning("%s: %s (public key %s)", what, reason, key.decode())
