"""Helpers of the worker-manager integration tests (the general ones live in conftest.py).

Workers started by a manager as commands get their settings as JSON on the command line; workers forked
by a manager's worker forker share the forker's command line, which holds the manager's worker settings
as JSON. So the worker processes of a test (agents, and their zygotes and processors, which are forks
sharing the command line) are found by a value in that JSON: the scheduler address or the manager id
(`worker_processes_with_setting`); a unit's processes by the agent's `NAT-<unit id>` setting or its
`w-<unit id>` process name (`unit_processes`).
"""

from __future__ import annotations

import psutil

from scaler.protocol import messages as m
from scaler.worker_manager.baremetal_native.worker_forker import worker_process_name
from tests.integration.conftest import Addresses, Launcher, Service

#: The process name of a manager's worker forker.
FORKER_NAME = "scaler-forker"


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


def worker_processes_with_setting(value: str) -> list[psutil.Process]:
    """The worker processes among `processes_with_setting(value)`: the worker forkers serve a manager and
    stop with it; they are not workers."""
    return [process for process in processes_with_setting(value) if _name(process) != FORKER_NAME]


def forkers_with_setting(value: str) -> list[psutil.Process]:
    return [process for process in processes_with_setting(value) if _name(process) == FORKER_NAME]


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return ""


def unit_processes(unit_id: str) -> list[psutil.Process]:
    """The live processes of a native unit: its worker agent (started as a command, or forked and named
    `w-<unit id>`), with its zygote and processors."""
    found: dict[int, psutil.Process] = {p.pid: p for p in worker_processes_with_setting(f"NAT-{unit_id}")}
    for process in psutil.process_iter():
        try:
            if process.name() == worker_process_name(unit_id) and process.status() != psutil.STATUS_ZOMBIE:
                for member in [process, *process.children(recursive=True)]:
                    found.setdefault(member.pid, member)
        except psutil.Error:
            continue
    return list(found.values())


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
