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
from collections.abc import Mapping
from typing import Any

import zmq

from scaler.io.sockets import MONITOR_DOMAIN, Closeable, Socket
from scaler.security.authorized_folder import AuthorizedFolder, authorized_keys, authorized_sharing
from scaler.security.key_files import KeyFileError, read_key_pair, read_key_text, read_public_key


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

        authenticator = ThreadAuthenticator(context, log=logging.getLogger("scaler.security.curve.zap"))
        authenticator.start()
        # the servers share one key pair: the scheduler connecting to its object storage is always let in
        provider = self.peer_roles()
        assert provider is not None
        for domain in ("*", MONITOR_DOMAIN):  # "*": sockets without a domain; pyzmq matches domains exactly
            authenticator.configure_curve_callback(domain, credentials_provider=provider)
        return StoppingAuthenticator(authenticator)


class StoppingAuthenticator:
    """A started ZAP authenticator as the `Closeable` a transport security returns: closing it stops its thread."""

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
