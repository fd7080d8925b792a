"""ZeroMQ CURVE for every connection: authenticated (a server accepts only the public keys in its authorised
folder) and encrypted. Key files are ZeroMQ certificates, made by `scaler_keygen DIR NAME`:
`NAME.key` (public) and `NAME.key_secret` (secret, mode 0600).

A `CurveSecurity` holds key bytes and the authorised folder's path only, so it crosses forks (a worker's
reaches its processors). Servers check each connecting peer in a ZAP handler that re-reads the folder when it
changes: removing a key file revokes that key for its next connection without a restart.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import zmq

from scaler.io.key_sharing import SHARING_FILE, KeySharing, key_sharing
from scaler.io.peer_roles import MONITOR_DOMAIN, ROLE_FOLDERS, SERVER, key_roles, may_connect
from scaler.io.sockets import Closeable, Socket

logger = logging.getLogger(__name__)


class KeyFileError(ValueError):
    """A key file or folder that cannot be used; the message names it and says why."""


def read_key_pair(path: str) -> tuple[bytes, bytes]:
    """(public, secret) from a secret key file (`NAME.key_secret`)."""
    public, secret = _load(path)
    if secret is None:
        raise KeyFileError(f"{path}: this is a public key file; give the secret one (NAME.key_secret)")
    return public, secret


def read_public_key(path: str) -> bytes:
    """The public key of a key file (a public `NAME.key`; a secret file is refused, not to spread it)."""
    public, secret = _load(path)
    if secret is not None:
        raise KeyFileError(
            f"{path}: this is a secret key file; give the public one (NAME.key) and keep the secret one private"
        )
    return public


def _load(path: str) -> tuple[bytes, bytes | None]:
    import zmq.auth

    if not os.path.isfile(path):
        raise KeyFileError(f"{path}: no such key file (make keys with `scaler_keygen DIR NAME`)")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as error:
        raise KeyFileError(f"{path}: not a ZeroMQ certificate ({error})") from None
    if public is None or len(public) != 40:
        raise KeyFileError(f"{path}: not a ZeroMQ certificate (no 40-character public key)")
    return public, secret


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


def read_key_text(text: str, source: str) -> tuple[bytes, bytes | None]:
    """(public, secret or None) from a certificate's text (a key file's content, e.g. from an environment
    variable or a cloud secret); `source` names where it came from in errors."""
    public = secret = None
    for line in text.splitlines():
        name, equals, value = line.strip().partition("=")
        if not equals:
            continue
        value = value.strip().strip('"')
        if name.strip() == "public-key":
            public = value.encode()
        elif name.strip() == "secret-key":
            secret = value.encode()
    if public is None or len(public) != 40 or (secret is not None and len(secret) != 40):
        raise KeyFileError(f"{source}: not a ZeroMQ certificate (no 40-character public-key line)")
    return public, secret


class CurveSecurity:
    """Keys of one component. A server (scheduler, object storage) has `authorized_folder`; a connecting side has
    `server_public`. A server connecting to another server (the scheduler to its object storage) uses its own
    public key as the server's: one server key pair serves both."""

    def __init__(self, public: bytes, secret: bytes, server_public: bytes, authorized_folder: str | None = None):
        self.public, self.secret = public, secret
        self.server_public = server_public
        self.authorized_folder = authorized_folder
        if authorized_folder is not None:
            authorized_keys(authorized_folder)  # refuse a missing or broken folder at start
            authorized_sharing(authorized_folder)
        self._authorized: AuthorizedFolder | None = None  #: made in the process that serves (not inherited)

    def secure_server(self, sock: Socket) -> None:
        if self.authorized_folder is None:
            raise KeyFileError("a CURVE server needs its folder of authorised keys (--curve-authorized-keys)")
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = self.secret, self.public, True

    def peer_roles(self) -> AuthorizedFolder | None:
        """The live answer to "what may this public key do?" on a server (None on a connecting side): the same
        view the handshake uses, so a server can refuse a role or a revoked key on an open connection."""
        if self.authorized_folder is None:
            return None
        if self._authorized is None or self._authorized.pid != os.getpid():
            self._authorized = AuthorizedFolder(self.authorized_folder, server=self.public)
        return self._authorized

    def secure_client(self, sock: Socket) -> None:
        sock.curve_secretkey, sock.curve_publickey, sock.curve_serverkey = self.secret, self.public, self.server_public

    def start_authenticator(self, context: zmq.Context[Any]) -> Closeable:
        if self.authorized_folder is None:
            return _Nothing()
        from zmq.auth.thread import ThreadAuthenticator

        authenticator = ThreadAuthenticator(context, log=logging.getLogger("scaler.io.curve.zap"))
        authenticator.start()
        # the servers share one key pair: the scheduler connecting to its object storage is always let in
        provider = self.peer_roles()
        assert provider is not None
        for domain in ("*", MONITOR_DOMAIN):  # "*": sockets without a domain; pyzmq matches domains exactly
            authenticator.configure_curve_callback(domain, credentials_provider=provider)
        return _Stopping(authenticator)


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
            logger.error("cannot read the authorised keys in %s: %s; refusing every peer", self._folder, error)
            self._roles = {}
            return
        if stamp != self._seen:
            try:
                self._roles, self._sharing = authorized_keys(self._folder), authorized_sharing(self._folder)
            except KeyFileError as error:
                logger.error("%s; the previous authorised keys stay in force", error)
                return
            self._seen = stamp
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


class _Stopping:
    def __init__(self, authenticator: Any) -> None:
        self._authenticator = authenticator

    def close(self) -> None:
        self._authenticator.stop()


class _Nothing:
    def close(self) -> None:
        return None


def curve_security(
    secret_key: str | None, server_key: str | None = None, authorized_folder: str | None = None
) -> CurveSecurity | None:
    """The security the settings describe: None when no key is set (plain TCP). Raises KeyFileError."""
    if secret_key is None and server_key is None and authorized_folder is None:
        return None
    if secret_key is None:
        raise KeyFileError("--curve-secret-key is needed with --curve-server-key or --curve-authorized-keys")
    public, secret = read_key_pair(secret_key)
    if server_key is not None:
        server_public = read_public_key(server_key)
    elif authorized_folder is not None:
        server_public = public  # a server: its own key pair is the cluster's server key pair
    else:
        raise KeyFileError("--curve-server-key (the server's public key file) is needed with --curve-secret-key")
    return CurveSecurity(public, secret, server_public, authorized_folder)


#: A connecting side's keys as text (a key file's content), where files are awkward: the workers a cloud manager
#: starts get them from the unit's environment (an ECS secret, a Batch job's environment, EC2 user data).
SECRET_KEY_TEXT_VARIABLE = "SCALER_CURVE_SECRET_KEY_TEXT"
SERVER_KEY_TEXT_VARIABLE = "SCALER_CURVE_SERVER_KEY_TEXT"


def security_of(settings: object) -> CurveSecurity | None:
    """From any settings section with curve_* fields, or a dict of them (absent ones count as not set). A
    connecting side whose settings name no key file takes its keys from the text variables, if they are set."""
    if isinstance(settings, dict):
        security = curve_security(
            settings.get("curve_secret_key"), settings.get("curve_server_key"), settings.get("curve_authorized_keys")
        )
        is_server = "curve_authorized_keys" in settings
    else:
        security = curve_security(
            getattr(settings, "curve_secret_key", None),
            getattr(settings, "curve_server_key", None),
            getattr(settings, "curve_authorized_keys", None),
        )
        is_server = hasattr(settings, "curve_authorized_keys")
    if security is None and not is_server:
        return security_from_environment(os.environ)
    return security


def security_from_environment(environment: Mapping[str, str]) -> CurveSecurity | None:
    """A connecting side's keys from SCALER_CURVE_SECRET_KEY_TEXT and SCALER_CURVE_SERVER_KEY_TEXT (None when
    neither is set). Raises KeyFileError naming the variable that is wrong."""
    secret_text = environment.get(SECRET_KEY_TEXT_VARIABLE)
    server_text = environment.get(SERVER_KEY_TEXT_VARIABLE)
    if not secret_text and not server_text:
        return None
    if not secret_text or not server_text:
        missing = SECRET_KEY_TEXT_VARIABLE if not secret_text else SERVER_KEY_TEXT_VARIABLE
        raise KeyFileError(f"{missing} is not set: it goes with the other CURVE key variable")
    public, secret = read_key_text(secret_text, SECRET_KEY_TEXT_VARIABLE)
    if secret is None:
        raise KeyFileError(f"{SECRET_KEY_TEXT_VARIABLE}: holds a public key; give the secret key file's content")
    server_public, server_secret = read_key_text(server_text, SERVER_KEY_TEXT_VARIABLE)
    if server_secret is not None:
        raise KeyFileError(
            f"{SERVER_KEY_TEXT_VARIABLE}: holds a secret key; give the server's public key file's content"
        )
    return CurveSecurity(public, secret, server_public)


def key_texts(security: CurveSecurity) -> dict[str, str]:
    """The two text variables that give a worker the same keys as `security` (what a cloud manager ships)."""
    secret = f'curve\n    public-key = "{security.public.decode()}"\n    secret-key = "{security.secret.decode()}"\n'
    server = f'curve\n    public-key = "{security.server_public.decode()}"\n'
    return {SECRET_KEY_TEXT_VARIABLE: secret, SERVER_KEY_TEXT_VARIABLE: server}


def make_key_pair(folder: str, name: str) -> tuple[Path, Path]:
    """`folder/name.key` and `folder/name.key_secret` (mode 0600); returns (public, secret) paths."""
    import zmq.auth

    os.makedirs(folder, exist_ok=True)
    public, secret = zmq.auth.create_certificates(folder, name)
    os.chmod(secret, 0o600)
    return Path(public), Path(secret)


class ClusterKeys:
    """Throw-away keys of one local cluster (`SchedulerClusterCombo(secure=True)`): a server pair, a client pair
    and a workers pair in a private temporary folder, the client authorised as a client, the workers as managers
    (and so as workers)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @classmethod
    def make(cls) -> ClusterKeys:
        import tempfile

        folder = tempfile.mkdtemp(prefix="scaler-keys-")
        for name in ("server", "client", "workers"):
            make_key_pair(os.path.join(folder, "pairs"), name)
        authorized = os.path.join(folder, "authorized")
        os.makedirs(authorized)
        os.makedirs(os.path.join(authorized, "managers"))  # the workers' pair serves managers and their workers
        os.link(os.path.join(folder, "pairs", "client.key"), os.path.join(authorized, "client.key"))
        os.link(os.path.join(folder, "pairs", "workers.key"), os.path.join(authorized, "managers", "workers.key"))
        return cls(folder)

    def _pair(self, name: str) -> str:
        return os.path.join(self.folder, "pairs", name)

    def server_settings(self) -> dict[str, Any]:
        return {
            "curve_secret_key": self._pair("server.key_secret"),
            "curve_authorized_keys": os.path.join(self.folder, "authorized"),
        }

    def worker_settings(self) -> dict[str, Any]:
        return {"curve_secret_key": self._pair("workers.key_secret"), "curve_server_key": self._pair("server.key")}

    def client_settings(self) -> dict[str, str]:
        return {"curve_secret_key": self._pair("client.key_secret"), "curve_server_key": self._pair("server.key")}

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)
