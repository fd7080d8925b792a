"""A `scaler FILE` stack's `[security]` section applied to every component it starts: the servers get the server
key pair and the folder of authorised keys, the managers (and the workers they start) and the dashboard get the
workers' key pair and the server's public key. A key a component's own section sets is kept."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from scaler.config.loader import LauncherFile
from scaler.config.sections import StackSecurityConfig
from scaler.io.curve import KeyFileError, authorized_keys, curve_security
from scaler.io.peer_roles import MANAGER, scheduler_refusal

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
