"""The schedulers this process knows: those it started (a `SchedulerClusterCombo` notes its own, with its monitor
address, so that `performance_report` finds the feed of a cluster started with a custom monitor address) and those
its connected clients talk to (a `Client` notes itself while it is connected)."""

from __future__ import annotations

import weakref

from scaler.io.sockets import TransportSecurity

#: owner (a running cluster object) -> (scheduler address, monitor address); an owner forgotten goes away
_STARTED: weakref.WeakKeyDictionary[object, tuple[str, str]] = weakref.WeakKeyDictionary()


def note_started(owner: object, scheduler_address: str, monitor_address: str) -> None:
    _STARTED[owner] = (scheduler_address, monitor_address)


def note_stopped(owner: object) -> None:
    _STARTED.pop(owner, None)


def started() -> dict[str, str]:
    """Scheduler address -> monitor address, for every scheduler this process started and has not stopped."""
    return dict(list(_STARTED.values()))


#: connected client -> (scheduler address, its transport security); a client forgotten goes away
_CLIENTS: weakref.WeakKeyDictionary[object, tuple[str, TransportSecurity | None]] = weakref.WeakKeyDictionary()


def note_client(owner: object, scheduler_address: str, security: TransportSecurity | None) -> None:
    _CLIENTS[owner] = (scheduler_address, security)


def note_client_closed(owner: object) -> None:
    _CLIENTS.pop(owner, None)


def client_schedulers() -> list[tuple[str, TransportSecurity | None]]:
    """The scheduler address and transport security of each connected client of this process."""
    return list(_CLIENTS.values())
