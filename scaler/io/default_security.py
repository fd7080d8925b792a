"""Secure by default: the keys a server or a connecting side uses when its settings name none.

A server (scheduler, object storage) without key settings uses the user's keys (`key_folder.user_keys`) and
registers a connection file for each address it serves while it runs (`ServedAddresses`); `--insecure` turns this
off, with a warning, and registers files that say so. A connecting side without key settings (and without the key
text variables a cloud unit gets) looks for the connection file of its address and takes the pair of its role:
"client" for clients and tools, "worker" for workers and worker managers (none for an insecure server). Without a
live connection file, an address of this machine gets the user's keys (its server may be starting: made once,
both sides agree), any other address plain TCP (a remote server's keys are given: `scaler_keygen export`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

from scaler.io.curve import CurveSecurity, KeyFileError, curve_security, security_of
from scaler.io.key_folder import KeyFolder, user_keys
from scaler.io.sockets import TransportSecurity
from scaler.io.stack_keys import (
    discovered_connection,
    discovered_key_settings,
    is_local_address,
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
    """A server's keys: `security` None for plain TCP; `user_keys` set when they are the user's keys, `insecure`
    when plain TCP was asked for (either way the server registers connection files for the addresses it serves:
    local sides then use the user's keys, or none)."""

    security: TransportSecurity | None
    user_keys: KeyFolder | None = None
    insecure: bool = False


def server_security(settings: object, what: str) -> ServerSecurity:
    """The keys of a server's settings (explicit curve_* settings; none with `insecure`, after a warning naming
    `what`; else the user's keys, made at first use). Raises KeyFileError."""
    explicit = security_of(settings)
    if explicit is not None:
        return ServerSecurity(explicit)
    if _setting(settings, "insecure"):
        logger.warning(INSECURE_WARNING, what)
        return ServerSecurity(None, insecure=True)
    keys = user_keys()
    return ServerSecurity(keys.server_security(), keys)


def connecting_security(settings: object, address: str, role: str) -> CurveSecurity | None:
    """The keys of a connecting side: its settings' (or the key text variables'), else those of the connection
    file of `address` for `role` ("client" or "worker"), else None (plain TCP). Raises KeyFileError."""
    explicit = security_of(settings)
    if explicit is not None:
        return explicit
    found = local_key_settings(address, role)
    return curve_security(found["curve_secret_key"], found["curve_server_key"]) if found is not None else None


def local_key_settings(address: str, role: str) -> dict[str, str] | None:
    """The key files a side of `role` uses for `address` without settings: those the live connection file of
    the address names (none for an `--insecure` server); with no connection file, the user's keys for an address
    of this machine (its server may still be starting; it makes and uses the same keys); else None."""
    if discovered_connection(address) is not None:
        return discovered_key_settings(address, role)
    if not is_local_address(address):
        return None
    try:
        return user_keys().connecting_settings(role)
    except (OSError, KeyFileError):  # another user's folder, a read-only home: plain TCP, refused with a reason
        return None


def with_discovered_keys(settings: T, address: str, role: str) -> T:
    """`settings` (a dataclass with curve_secret_key and curve_server_key) naming the key files of the connection
    file of `address` when they name none (and no key text variable is set): what a worker manager hands the
    workers it starts. Raises KeyFileError."""
    if security_of(settings) is not None:
        return settings
    found = local_key_settings(address, role)
    if found is None:
        return settings
    return dataclasses.replace(settings, **found)  # type: ignore[type-var]


def _setting(settings: object, name: str) -> bool:
    value = settings.get(name) if isinstance(settings, dict) else getattr(settings, name, False)
    return bool(value)


class ServedAddresses:
    """The connection files of a server using the user's keys, from `with` until its end (none otherwise)."""

    def __init__(self, security: ServerSecurity, addresses: list[str], ship_local_modules: bool = False) -> None:
        self._keys = security.user_keys
        self._registers = security.user_keys is not None or security.insecure
        self._addresses = addresses
        self._ship_local_modules = ship_local_modules  #: local clients send their working folder's modules by value

    def register(self) -> None:
        if self._registers:
            register_connection(self._addresses, self._keys, ship_local_modules=self._ship_local_modules)

    def unregister(self) -> None:
        if self._registers:
            unregister_connection(self._addresses)

    def __enter__(self) -> ServedAddresses:
        self.register()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.unregister()
