"""The one search for keys: `find_keys` for every connecting side (clients, monitor readers, `scaler_top`, the
dashboard, workers, worker managers), `server_keys` for every server (scheduler, object storage). Secure by
default: the keys a server or a connecting side uses when its settings name none.

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
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeVar

from scaler.io.sockets import TransportSecurity
from scaler.security.connection_files import (
    connection_file,
    discovered_connection,
    discovered_key_settings,
    is_local_address,
    register_connection,
    unregister_connection,
)
from scaler.security.curve import (
    SECRET_KEY_TEXT_VARIABLE,
    CurveSecurity,
    curve_security,
    security_from_environment,
    security_of,
)
from scaler.security.key_files import KeyFileError
from scaler.security.key_folder import KeyFolder, user_keys

T = TypeVar("T")

logger = logging.getLogger(__name__)

INSECURE_WARNING = (
    "%s runs without CURVE keys (--insecure): anyone who can reach its ports can submit tasks, read every "
    "client's task arguments and results, and forge results; use it only on a network you trust"
)


@dataclass(frozen=True)
class ServerKeys:
    """A server's keys: `security` None for plain TCP; `user_keys` set when they are the user's keys, `insecure`
    when plain TCP was asked for (either way the server registers connection files for the addresses it serves:
    local sides then use the user's keys, or none)."""

    security: TransportSecurity | None
    user_keys: KeyFolder | None = None
    insecure: bool = False


def server_keys(settings: object, what: str) -> ServerKeys:
    """The keys of a server's settings (explicit curve_* settings; none with `insecure`, after a warning naming
    `what`; else the user's keys, made at first use). Raises KeyFileError."""
    explicit = security_of(settings)
    if explicit is not None:
        return ServerKeys(explicit)
    if _setting(settings, "insecure"):
        logger.warning(INSECURE_WARNING, what)
        return ServerKeys(None, insecure=True)
    keys = user_keys()
    return ServerKeys(keys.server_security(), keys)


@dataclass(frozen=True)
class FoundKeys:
    """The keys a connecting side of `role` uses for `address`, where they came from, and what the connection file
    of the address (if any) says is served there."""

    role: str
    address: str
    security: TransportSecurity | None  #: None: plain TCP
    source: str  #: where the keys came from, for messages ("the connection file ...", "the user's keys ...")
    #: given by the caller (arguments, settings, the key text variables, the task's worker): never found again
    fixed: bool = True
    ship_local_modules: bool = False  #: the stack asks its clients to ship their working folder's modules
    service: str | None = None  #: what the connection file says answers at the address (SCHEDULER, STORAGE, MONITOR)
    services: Mapping[str, str] = field(default_factory=dict)  #: the other addresses of that server or stack
    starting_until: float | None = None  #: wall-clock bound of a stack still starting when its file was read

    @property
    def starting(self) -> bool:
        """The server or stack that registered these keys is still starting (its hub booting)."""
        return self.starting_until is not None and time.time() < self.starting_until

    def again(self) -> FoundKeys:
        """The keys found afresh (a stack that has published its keys since, or restarted with new ones); the
        same record when they were given. Raises KeyFileError."""
        return self if self.fixed else find_keys(self.role, self.address)

    def same_keys(self, other: FoundKeys) -> bool:
        return _key_bytes(self.security) == _key_bytes(other.security)

    def wrong_service(self, expected: str) -> str | None:
        """Why the address is not one of `expected` (SCHEDULER, STORAGE, MONITOR), when its connection file says
        so; None when it is, or nothing is known."""
        if self.service is None or self.service == expected:
            return None
        right = self.services.get(expected)
        where = f"; the {expected} is at {right}" if right else ""
        return f"{self.address} is the {self.service} address of a scaler server, not a {expected}{where}"


def find_keys(
    role: str, address: str, explicit: object = None, *, inherited: TransportSecurity | None = None
) -> FoundKeys:
    """The keys a connecting side of `role` ("client" for clients and monitor readers, "worker" for workers and
    worker managers) uses for `address`, the one search every connecting component makes:

    1. `explicit`: a TransportSecurity, or settings with curve_secret_key/curve_server_key (a section or a dict);
    2. `inherited`: the keys of the task this code runs in (a Client created inside a task);
    3. the key text variables a cloud unit gets (SCALER_CURVE_SECRET_KEY_TEXT, SCALER_CURVE_SERVER_KEY_TEXT);
    4. the live connection file of the address (a local server using the user's keys, a stack), while it starts too;
    5. for an address of this machine without one, the user's keys (its server may be starting: both sides agree);
    6. else plain TCP (a remote server's keys are given: `scaler_keygen export`).

    Keys from 4-6 are found again by `FoundKeys.again` (a stack that published or changed its keys since). Raises
    KeyFileError naming the file or variable that is wrong."""
    if explicit is not None and hasattr(explicit, "secure_client"):
        return FoundKeys(role, address, explicit, "the keys given")  # type: ignore[arg-type]
    if explicit is not None:
        given = _given_key_files(explicit)
        if given is not None:
            return FoundKeys(role, address, given, "the key files given (curve_secret_key, curve_server_key)")
    if inherited is not None:
        return FoundKeys(role, address, inherited, "the keys of the worker running this task")
    from_variables = security_from_environment(os.environ)
    if from_variables is not None:
        return FoundKeys(role, address, from_variables, f"the key text variables ({SECRET_KEY_TEXT_VARIABLE}, ...)")
    record = discovered_connection(address, starting=True)
    if record is not None:
        settings = discovered_key_settings(address, role, record)
        security = curve_security(settings["curve_secret_key"], settings["curve_server_key"]) if settings else None
        until = record.get("starting_until")
        return FoundKeys(
            role, address, security, f"the connection file {connection_file(address, record)}", fixed=False,
            ship_local_modules=bool(record.get("ship_local_modules")),
            service=_text(record.get("service")), services=_services(record.get("services")),
            starting_until=float(until) if isinstance(until, (int, float)) and record.get("starting") else None,
        )  # fmt: skip
    if is_local_address(address):
        try:
            keys = user_keys()
            return FoundKeys(role, address, keys.connecting_security(role), f"the user's keys ({keys.folder})", False)
        except (OSError, KeyFileError):  # another user's folder, a read-only home: plain TCP, refused with a reason
            pass
    return FoundKeys(role, address, None, "none (plain TCP)", fixed=False)


def local_key_settings(address: str, role: str) -> dict[str, str] | None:
    """The key files a side of `role` uses for `address` without settings: those the live connection file of
    the address names (none for an `--insecure` server); with no connection file, the user's keys for an address
    of this machine (its server may still be starting; it makes and uses the same keys); else None."""
    record = discovered_connection(address, starting=True)
    if record is not None:
        return discovered_key_settings(address, role, record)
    if not is_local_address(address):
        return None
    try:
        return user_keys().connecting_settings(role)
    except (OSError, KeyFileError):  # another user's folder, a read-only home: plain TCP, refused with a reason
        return None


def with_discovered_keys(settings: T, address: str, role: str) -> T:
    """`settings` (a dataclass with curve_secret_key and curve_server_key) naming the key files `find_keys` would
    use for `address` when they name none (and no key text variable is set): what a worker manager hands the
    workers it starts. Raises KeyFileError."""
    if security_of(settings) is not None:
        return settings
    found = local_key_settings(address, role)
    if found is None:
        return settings
    return dataclasses.replace(settings, **found)  # type: ignore[type-var]


def _given_key_files(settings: object) -> CurveSecurity | None:
    if isinstance(settings, dict):
        secret, server = settings.get("curve_secret_key"), settings.get("curve_server_key")
    else:
        secret, server = getattr(settings, "curve_secret_key", None), getattr(settings, "curve_server_key", None)
    return curve_security(secret, server)


def _key_bytes(security: TransportSecurity | None) -> tuple[bytes, bytes] | None:
    if security is None:
        return None
    return getattr(security, "public", b""), getattr(security, "server_public", b"")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _services(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {name: where for name, where in value.items() if isinstance(name, str) and isinstance(where, str)}


def _setting(settings: object, name: str) -> bool:
    value = settings.get(name) if isinstance(settings, dict) else getattr(settings, name, False)
    return bool(value)


class ServedAddresses:
    """The connection files of a server using the user's keys, from `with` until its end (none otherwise).
    `services`: service (SCHEDULER, STORAGE, MONITOR) -> the address it serves; `known`: the addresses of the
    other services of the same cluster, which a side that met the wrong port is pointed to."""

    def __init__(
        self,
        keys: ServerKeys,
        services: Mapping[str, str],
        known: Mapping[str, str] | None = None,
        ship_local_modules: bool = False,
    ) -> None:
        self._keys = keys.user_keys
        self._registers = keys.user_keys is not None or keys.insecure
        self._services = dict(services)
        self._known = {**(known or {}), **services}
        self._ship_local_modules = ship_local_modules  #: local clients send their working folder's modules by value

    def register(self) -> None:
        if self._registers:
            register_connection(
                self._services, self._keys, ship_local_modules=self._ship_local_modules, known=self._known
            )

    def unregister(self) -> None:
        if self._registers:
            unregister_connection(list(self._services.values()))

    def __enter__(self) -> ServedAddresses:
        self.register()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.unregister()
