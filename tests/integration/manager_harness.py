"""Helpers of the worker-manager integration tests (the general ones live in conftest.py).

Workers started by a manager get their settings as JSON on the command line, so the processes of a
test's workers (agents, and their zygotes and processors, which are forks sharing the command line)
are found by a value in that JSON: the scheduler address, the manager id, or `NAT-<unit id>`.
"""

from __future__ import annotations

import psutil

from scaler.protocol import messages as m
from tests.integration.conftest import Addresses, Launcher, Service


def processes_with_setting(value: str) -> list[psutil.Process]:
    """Live (non-zombie) processes with `"<value>"` in a command-line argument (a JSON string value)."""
    quoted = f'"{value}"'
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and any(quoted in part for part in process.cmdline()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def start_manager(launcher: Launcher, addresses: Addresses, manager_id: str, *args: str) -> Service:
    """`scaler_worker_manager baremetal_native` in dynamic mode, heartbeating every second."""
    return launcher.start(
        "scaler_worker_manager", "baremetal_native", addresses.scheduler, "-wmi", manager_id, "-his", "1", "-ll",
        "INFO", *args,
    )  # fmt: skip


def workers_of(snapshot: m.StatusSnapshot, manager_id: str) -> list[m.WorkerSummary]:
    return [worker for worker in snapshot.workers if worker.manager_id == manager_id]


def manager_of(snapshot: m.StatusSnapshot, manager_id: str) -> m.ManagerSummary | None:
    return next((manager for manager in snapshot.managers if manager.manager_id == manager_id), None)
