"""The servers' folder of authorised public keys as a server reads it: which roles a key has (`roles`), its
share and quota (`quotas`), and the live view a server's ZAP handler and shell ask about each peer, read again
whenever the folder changes (removing a key file revokes that key for its next connection without a restart)."""

from __future__ import annotations

import logging
import os
import threading
import time

from scaler.io.sockets import MONITOR_DOMAIN
from scaler.security.key_files import KeyFileError, read_public_key
from scaler.security.quotas import SHARING_FILE, KeySharing, key_sharing
from scaler.security.roles import ROLE_FOLDERS, SERVER, key_roles, may_connect

logger = logging.getLogger(__name__)


def authorized_keys(folder: str) -> dict[bytes, frozenset[str]]:
    """Public key -> roles, for every `*.key` file in `folder` and its role subfolders (`peer_roles`)."""
    if not os.path.isdir(folder):
        raise KeyFileError(f"{folder}: no such folder of authorised public keys")
    return key_roles(folder, read_public_key)


def authorized_sharing(folder: str) -> dict[bytes, KeySharing]:
    """Public key -> its share and quota, from the folder's `sharing.toml` (`key_sharing`)."""
    try:
        return key_sharing(folder, read_public_key)
    except ValueError as error:
        raise KeyFileError(str(error)) from None


#: How stale a shell's view of the authorised folder may be (handshakes always read it afresh).
RELOAD_SECONDS = 0.2


class AuthorizedFolder:
    """The folder of authorised keys as it is now: the ZAP handler asks it about each handshake (in its thread),
    a server's shell about each registration and, every second, about the keys of its open connections."""

    def __init__(self, folder: str, server: bytes) -> None:
        self.pid = os.getpid()
        self._folder = folder
        self._server = server  #: the servers' own public key: the scheduler connecting to its object storage
        self._lock = threading.Lock()
        self._seen: tuple[tuple[str, float, tuple[str, ...]], ...] | None = None
        self._roles: dict[bytes, frozenset[str]] = {}
        self._sharing: dict[bytes, KeySharing] = {}
        self._refused: set[bytes] = set()
        self._looked_at = -RELOAD_SECONDS
        #: the stamp of a folder found broken (a bad sharing.toml or key file): said once, not read again until it
        #: changes (it is looked at every RELOAD_SECONDS and at each handshake)
        self._broken: tuple[tuple[str, float, tuple[str, ...]], ...] | None = None
        self._unreadable = ""  #: the last "cannot read" said (said once while it lasts)

    def roles_of(self, public_key: bytes) -> frozenset[str]:
        """The roles of a z85 public key now (empty: not authorised, or no longer). The folder is looked at
        again at most every RELOAD_SECONDS here (a shell asks about every connected peer each second); a
        handshake always looks."""
        with self._lock:
            now = time.monotonic()
            if now - self._looked_at >= RELOAD_SECONDS:
                self._looked_at = now
                self._reload_if_changed()
            return self._roles_of(public_key)

    def sharing_of(self, public_key: bytes) -> KeySharing | None:
        """The share and quota the administrator set for a key (None: none), as `roles_of` reads the folder."""
        with self._lock:
            return self._sharing.get(public_key)

    def _roles_of(self, public_key: bytes) -> frozenset[str]:
        if public_key == self._server:
            return frozenset({SERVER})
        return self._roles.get(public_key, frozenset())

    def callback(self, domain: str, public_key: bytes) -> bool:
        with self._lock:
            self._reload_if_changed()
            roles = self._roles_of(public_key)
            if may_connect(roles, domain):
                return True
            if public_key not in self._refused:  # once per key: a peer retrying must not flood the log
                self._refused.add(public_key)
                where = " to the monitor feed" if domain == MONITOR_DOMAIN else ""
                why = f"is not in {self._folder}" if not roles else "may only read the monitor feed"
                logger.warning("refused a connection%s: public key %s %s", where, public_key.decode(), why)
            return False

    def _reload_if_changed(self) -> None:
        try:
            stamp = _folder_stamp(self._folder)
        except OSError as error:
            said = f"cannot read the authorised keys in {self._folder}: {error}; refusing every peer"
            if said != self._unreadable:
                logger.error("%s", said)
                self._unreadable = said
            self._roles, self._seen = {}, None
            return
        self._unreadable = ""
        if stamp != self._seen and stamp != self._broken:
            try:
                self._roles, self._sharing = authorized_keys(self._folder), authorized_sharing(self._folder)
            except KeyFileError as error:
                logger.error("%s; the previous authorised keys stay in force", error)
                self._broken = stamp
                return
            self._seen, self._broken = stamp, None
            self._refused.clear()


def _folder_stamp(folder: str) -> tuple[tuple[str, float, tuple[str, ...]], ...]:
    """What changes when a key file is added to or removed from the folder or one of its role subfolders."""
    places = [folder, *(os.path.join(folder, name) for name in ROLE_FOLDERS)]
    stamp = []
    for place in places:
        if place != folder and not os.path.isdir(place):
            continue
        stamp.append((place, os.stat(place).st_mtime, tuple(sorted(os.listdir(place)))))
    sharing = os.path.join(folder, SHARING_FILE)
    if os.path.isfile(sharing):  # edited in place, it does not change the folder's time
        stamp.append((sharing, os.stat(sharing).st_mtime, ()))
    return tuple(stamp)
