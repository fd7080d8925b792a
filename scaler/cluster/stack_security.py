"""A `scaler FILE` stack's `[security]` section applied to every component it starts: the servers get the server
key pair and the folder of authorised keys, the managers (and the workers they start) and the dashboard get the
workers' key pair and the server's public key. A key a component's own section sets is kept. Without the section,
the user's keys (`secured_by_default`)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from scaler.config.loader import LauncherFile
from scaler.config.sections import StackSecurityConfig
from scaler.security.authorized_folder import authorized_keys
from scaler.security.curve import curve_security
from scaler.security.key_files import KeyFileError
from scaler.security.key_folder import user_keys
from scaler.security.roles import MANAGER, scheduler_refusal

T = TypeVar("T")


def check_stack_keys(security: StackSecurityConfig) -> None:
    """Raise KeyFileError (naming the file) before anything starts, also when the workers' key could not
    register its managers (it must sit in the authorised folder's managers/)."""
    curve_security(security.server_secret_key, None, security.authorized_keys)
    workers = curve_security(security.workers_secret_key, security.server_public_key)
    assert workers is not None
    roles = authorized_keys(security.authorized_keys).get(workers.public, frozenset())
    if scheduler_refusal(roles, MANAGER) is not None:
        held = f"authorised as {', '.join(sorted(roles))}" if roles else "not authorised"
        raise KeyFileError(
            f"{security.workers_secret_key}: its public key is {held} in {security.authorized_keys}; the key of the "
            f"worker managers (and the workers they start) goes in {security.authorized_keys}/managers/"
        )


def secured(file: LauncherFile) -> LauncherFile:
    security = file.security
    if security is None:
        return file
    server = {"curve_secret_key": security.server_secret_key, "curve_authorized_keys": security.authorized_keys}
    client = {"curve_secret_key": security.workers_secret_key, "curve_server_key": security.server_public_key}
    return dataclasses.replace(
        file,
        object_storage_server=_with(file.object_storage_server, server),
        scheduler=_with(file.scheduler, server),
        worker_managers=tuple(_with(manager, client) for manager in file.worker_managers),
        gui=_with(file.gui, client),
    )


def _with(section: T, keys: dict[str, Any]) -> T:
    if section is None or getattr(section, "curve_secret_key", None) is not None:
        return section
    return dataclasses.replace(section, **keys)  # type: ignore[type-var]


def secured_by_default(file: LauncherFile) -> tuple[LauncherFile, dict[str, str] | None]:
    """`secured(file)`, and for a stack that starts servers without a [security] section the user's keys
    (docs/guide/security.md): its servers use them by themselves, its managers get the workers' pair and its
    dashboard the client pair. `insecure = true` in [scheduler] or [object_storage_server] makes both servers
    plain TCP instead. Also returns the key settings the launcher's readiness probes use (None: none)."""
    if file.security is not None or (file.scheduler is None and file.object_storage_server is None):
        file = secured(file)
        keys = file.security
        if keys is None:
            return file, None
        return file, {"curve_secret_key": keys.workers_secret_key, "curve_server_key": keys.server_public_key}
    servers = [section for section in (file.scheduler, file.object_storage_server) if section is not None]
    if any(section.curve_secret_key is not None for section in servers):
        return file, None  # keys set section by section: the file says it all
    if any(section.insecure for section in servers):
        insecure = {"insecure": True}  # both servers: a secure storage would refuse an insecure scheduler
        return dataclasses.replace(
            file,
            scheduler=_with(file.scheduler, insecure),
            object_storage_server=_with(file.object_storage_server, insecure),
        ), None
    user = user_keys()
    workers = user.connecting_settings("worker")
    return dataclasses.replace(
        file,
        worker_managers=tuple(_with(manager, workers) for manager in file.worker_managers),
        gui=_with(file.gui, user.connecting_settings("client")),
    ), workers
