"""Secure by default: the keys a server or a connecting side uses when its settings name none.

A server (scheduler, object storage) without key settings uses the user's keys (`key_folder.user_keys`) and
registers a connection file for each address it serves while it runs (`ServedAddresses`); `--insecure` turns this
off, with a warning. A connecting side without key settings (and without the key text variables a cloud unit
gets) looks for the connection file of its address and takes the pair of its role: "client" for clients and
tools, "worker" for workers and worker managers. No connection file: plain TCP, as an insecure server expects.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

from scaler.io.curve import CurveSecurity, security_of
from scaler.io.key_folder import KeyFolder, user_keys
from scaler.io.sockets import TransportSecurity
from scaler.io.stack_keys import (
    discovered_key_settings,
    discovered_security,
    register_connection,
    unregister_connection,
)

T = TypeVar("T")

logger = logging.getLogger(__name__)

INSECURE_WARNING = (
    "%s runs without CURVE keys (--insecure): anyone who can reach its ports can submit tasks, read every "
    "client's task arguments and results, and forge results; use it only on a network you trust"
)


@dataclass(frozen=True)
class ServerSecurity:
    """A server's keys: `security` None for plain TCP; `user_keys` set when they are the user's keys (then the
    server registers connection files for the addresses it serves)."""

    security: TransportSecurity | None
    user_keys: KeyFolder | None = None


def server_security(settings: object, what: str) -> ServerSecurity:
    """The keys of a server's settings (explicit curve_* settings; none with `insecure`, after a warning naming
    `what`; else the user's keys, made at first use). Raises KeyFileError."""
    explicit = security_of(settings)
    if explicit is not None:
        return ServerSecurity(explicit)
    if _setting(settings, "insecure"):
        logger.warning(INSECURE_WARNING, what)
        return ServerSecurity(None)
    keys = user_keys()
    return ServerSecurity(keys.server_security(), keys)


def connecting_security(settings: object, address: str, role: str) -> CurveSecurity | None:
    """The keys of a connecting side: its settings' (or the key text variables'), else those of the connection
    file of `address` for `role` ("client" or "worker"), else None (plain TCP). Raises KeyFileError."""
    explicit = security_of(settings)
    if explicit is not None:
        return explicit
    return discovered_security(address, role)


def with_discovered_keys(settings: T, address: str, role: str) -> T:
    """`settings` (a dataclass with curve_secret_key and curve_server_key) naming the key files of the connection
    file of `address` when they name none (and no key text variable is set): what a worker manager hands the
    workers it starts. Raises KeyFileError."""
    if security_of(settings) is not None:
        return settings
    found = discovered_key_settings(address, role)
    if found is None:
        return settings
    return dataclasses.replace(settings, **found)  # type: ignore[type-var]


def _setting(settings: object, name: str) -> bool:
    value = settings.get(name) if isinstance(settings, dict) else getattr(settings, name, False)
    return bool(value)


class ServedAddresses:
    """The connection files of a server using the user's keys, from `with` until its end (none otherwise)."""

    def __init__(self, security: ServerSecurity, addresses: list[str]) -> None:
        self._keys = security.user_keys
        self._addresses = addresses

    def register(self) -> None:
        if self._keys is not None:
            register_connection(self._addresses, self._keys, ship_local_modules=False)

    def unregister(self) -> None:
        if self._keys is not None:
            unregister_connection(self._addresses)

    def __enter__(self) -> ServedAddresses:
        self.register()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.unregister()
