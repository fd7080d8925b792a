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
from pathlib import Path
from typing import Any

import zmq

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


def authorized_keys(folder: str) -> frozenset[bytes]:
    """The public keys of every `*.key` file in `folder`."""
    if not os.path.isdir(folder):
        raise KeyFileError(f"{folder}: no such folder of authorised public keys")
    return frozenset(read_public_key(str(path)) for path in sorted(Path(folder).glob("*.key")))


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

    def secure_server(self, sock: Socket) -> None:
        if self.authorized_folder is None:
            raise KeyFileError("a CURVE server needs its folder of authorised keys (--curve-authorized-keys)")
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = self.secret, self.public, True

    def secure_client(self, sock: Socket) -> None:
        sock.curve_secretkey, sock.curve_publickey, sock.curve_serverkey = self.secret, self.public, self.server_public

    def start_authenticator(self, context: zmq.Context[Any]) -> Closeable:
        if self.authorized_folder is None:
            return _Nothing()
        from zmq.auth.thread import ThreadAuthenticator

        authenticator = ThreadAuthenticator(context, log=logging.getLogger("scaler.io.curve.zap"))
        authenticator.start()
        # the servers share one key pair: the scheduler connecting to its object storage is always let in
        provider = _AuthorizedFolder(self.authorized_folder, also=self.public)
        authenticator.configure_curve_callback("*", credentials_provider=provider)
        return _Stopping(authenticator)


class _AuthorizedFolder:
    """The ZAP handler's question: is this public key in the folder (as it is now)?"""

    def __init__(self, folder: str, also: bytes) -> None:
        self._folder = folder
        self._also = also
        self._lock = threading.Lock()
        self._seen: tuple[float, tuple[str, ...]] | None = None
        self._keys: frozenset[bytes] = frozenset()
        self._refused: set[bytes] = set()

    def callback(self, domain: str, public_key: bytes) -> bool:
        with self._lock:
            self._reload_if_changed()
            if public_key in self._keys or public_key == self._also:
                return True
            if public_key not in self._refused:  # once per key: a peer retrying must not flood the log
                self._refused.add(public_key)
                logger.warning("refused a connection: public key %s is not in %s", public_key.decode(), self._folder)
            return False

    def _reload_if_changed(self) -> None:
        try:
            stamp = (os.stat(self._folder).st_mtime, tuple(sorted(os.listdir(self._folder))))
        except OSError as error:
            logger.error("cannot read the authorised keys in %s: %s; refusing every peer", self._folder, error)
            self._keys = frozenset()
            return
        if stamp != self._seen:
            try:
                self._keys = authorized_keys(self._folder)
            except KeyFileError as error:
                logger.error("%s; the previous authorised keys stay in force", error)
                return
            self._seen = stamp
            self._refused.clear()


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


def security_of(settings: object) -> CurveSecurity | None:
    """From any settings section with curve_* fields, or a dict of them (absent ones count as not set)."""
    if isinstance(settings, dict):
        return curve_security(
            settings.get("curve_secret_key"), settings.get("curve_server_key"), settings.get("curve_authorized_keys")
        )
    return curve_security(
        getattr(settings, "curve_secret_key", None),
        getattr(settings, "curve_server_key", None),
        getattr(settings, "curve_authorized_keys", None),
    )


def make_key_pair(folder: str, name: str) -> tuple[Path, Path]:
    """`folder/name.key` and `folder/name.key_secret` (mode 0600); returns (public, secret) paths."""
    import zmq.auth

    os.makedirs(folder, exist_ok=True)
    public, secret = zmq.auth.create_certificates(folder, name)
    os.chmod(secret, 0o600)
    return Path(public), Path(secret)


class ClusterKeys:
    """Throw-away keys of one local cluster (`SchedulerClusterCombo(secure=True)`): a server pair, a client pair
    and a workers pair in a private temporary folder, the client and workers authorised."""

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
        for name in ("client", "workers"):
            os.link(os.path.join(folder, "pairs", f"{name}.key"), os.path.join(authorized, f"{name}.key"))
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
