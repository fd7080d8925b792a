"""The schedulers this process started (a `SchedulerClusterCombo` notes its own), with their monitor addresses,
so that `performance_report` finds the feed of a cluster started with a custom monitor address."""

from __future__ import annotations

import weakref

#: owner (a running cluster object) -> (scheduler address, monitor address); an owner forgotten goes away
_STARTED: weakref.WeakKeyDictionary[object, tuple[str, str]] = weakref.WeakKeyDictionary()


def note_started(owner: object, scheduler_address: str, monitor_address: str) -> None:
    _STARTED[owner] = (scheduler_address, monitor_address)


def note_stopped(owner: object) -> None:
    _STARTED.pop(owner, None)


def started() -> dict[str, str]:
    """Scheduler address -> monitor address, for every scheduler this process started and has not stopped."""
    return dict(list(_STARTED.values()))
