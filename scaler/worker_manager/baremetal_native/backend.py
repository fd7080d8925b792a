"""The local-process backend: one unit = one worker process on this machine.

- launch: `python -m scaler.worker.process '<WorkerConfig>'` in a new session, so the worker agent leads a
  process group holding its zygote and processors. The worker type is `<prefix>-<unit id>`, which puts
  the unit id into the worker id (see `scaler.worker_manager.backend`). Units do not die with the
  manager: a manager that crashed and restarts adopts them (see `unit_records`).
- list_units: the units recorded for this manager whose process still runs (same pid *and* start time).
- terminate: SIGTERM to the worker agent, which leaves the scheduler gracefully (its tasks go back to
  the queue); SIGKILL to the whole process group if it is still there after the grace period.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import psutil

from scaler.cluster.child_processes import describe_exit, start_python_child
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.baremetal_native.unit_records import UnitRecord, UnitRecords

logger = logging.getLogger(__name__)

#: How long a worker gets to leave the scheduler before its process group is killed.
DEFAULT_GRACE_SECONDS = 10.0
#: Tolerance when comparing a process's start time with the recorded one.
_START_TIME_TOLERANCE_SECONDS = 0.05
#: How long after its start a process may still show no command line (its execve is not finished).
_EXEC_WINDOW_SECONDS = 5.0

#: Handles of units left running by `close()` (for the next manager to adopt). Kept so that Python does
#: not warn about child processes still running when their handles are collected.
_LEFT_RUNNING: list[subprocess.Popen[bytes]] = []


class NativeBackend:
    def __init__(self, manager_id: str, state_directory: Path, grace_seconds: float = DEFAULT_GRACE_SECONDS) -> None:
        self._manager_id = manager_id
        self._records = UnitRecords(state_directory)
        self._grace_seconds = grace_seconds
        #: units this instance started: their handles (to reap them)
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        #: units being stopped -> the timer that forces the stop
        self._stopping: dict[str, asyncio.TimerHandle] = {}
        self._known: dict[str, UnitRecord] = {}  #: latest records seen or written, by unit id

    @property
    def workers_per_unit(self) -> int:
        return 1

    # ------------------------------------------------------------ the contract

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        if spec.manager_id != self._manager_id:
            raise ValueError(f"this backend serves manager {self._manager_id!r}, not {spec.manager_id!r}")
        unit_ids: list[str] = []
        for _ in range(count):
            unit_id = uuid.uuid4().hex[:12]
            try:
                child = start_python_child(spec.worker_module_args(unit_id), new_session=True, die_with_parent=False)
            except OSError:
                if not unit_ids:
                    raise
                logger.exception("could not start a worker process; %d of %d started", len(unit_ids), count)
                break
            record = UnitRecord(unit_id, self._manager_id, child.pid, _start_time(child.pid), time.time())
            self._children[unit_id] = child
            self._known[unit_id] = record
            self._records.save(record)
            logger.debug("unit %s: worker pid %d", unit_id, child.pid)
            unit_ids.append(unit_id)
        return unit_ids

    async def list_units(self) -> list[UnitInfo]:
        units = []
        for record in self._current_records():
            if self._is_running(record):
                state = UnitState.STOPPING if record.unit_id in self._stopping else UnitState.RUNNING
                units.append(UnitInfo(record.unit_id, state, record.created_at, detail=f"pid {record.pid}"))
            else:
                detail = self._collect(record)
                units.append(UnitInfo(record.unit_id, UnitState.GONE, record.created_at, detail=detail))
        return units

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        records = {record.unit_id: record for record in self._current_records()}
        loop = asyncio.get_running_loop()
        for unit_id in unit_ids:
            record = records.get(unit_id)
            if record is None or unit_id in self._stopping or not self._is_running(record):
                continue
            logger.info("stopping unit %s (worker pid %d): %s", unit_id, record.pid, reason)
            _signal_process(record.pid, signal.SIGTERM)
            self._stopping[unit_id] = loop.call_later(self._grace_seconds, self._force_stop, record)

    async def close(self) -> None:
        """Forces the stops in flight and cleans up after units that ended; other units keep running."""
        for unit_id, timer in list(self._stopping.items()):
            timer.cancel()
            record = self._known.get(unit_id)
            if record is not None:
                self._force_stop(record)
        for record in self._current_records():
            child = self._children.get(record.unit_id)
            if child is not None and record.unit_id in self._stopping:
                await _wait_for_exit(child, self._grace_seconds)
            if not self._is_running(record):
                self._collect(record)
        _LEFT_RUNNING.extend(self._children.values())
        self._children.clear()
        self._stopping.clear()
        self._records.remove_directory_if_empty()

    # ------------------------------------------------------------ processes

    def _current_records(self) -> list[UnitRecord]:
        """The recorded units of this manager, and the ones this instance started even if their record is gone."""
        records = {r.unit_id: r for r in self._records.load_all() if r.manager_id == self._manager_id}
        for unit_id in self._children:
            if unit_id not in records and unit_id in self._known:
                records[unit_id] = self._known[unit_id]
        self._known.update(records)
        return sorted(records.values(), key=lambda record: (record.created_at, record.unit_id))

    def _is_running(self, record: UnitRecord) -> bool:
        child = self._children.get(record.unit_id)
        if child is not None:
            return not _has_exited(child)
        return _is_same_live_process(record)

    def _force_stop(self, record: UnitRecord) -> None:
        if not self._is_running(record):
            return
        logger.warning("unit %s did not stop within %g s: killing its processes", record.unit_id, self._grace_seconds)
        _kill_group(record.pid)

    def _collect(self, record: UnitRecord) -> str:
        """Clean up after a unit whose worker process ended; returns how it ended."""
        detail = f"pid {record.pid} ended"
        child = self._children.pop(record.unit_id, None)
        if child is not None:
            if child.returncode is None:
                # The unreaped leader still holds the group id, so this reaches only the unit's leftovers.
                _kill_group(record.pid)
            child.wait()
            detail = f"pid {record.pid}: {describe_exit(child.returncode)}"
        timer = self._stopping.pop(record.unit_id, None)
        if timer is not None:
            timer.cancel()
        self._records.remove(record.unit_id)
        self._known.pop(record.unit_id, None)
        return detail


def _start_time(pid: int) -> float:
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return 0.0


def _has_exited(child: subprocess.Popen[bytes]) -> bool:
    """Whether the child ended, without reaping it (its pid, and so its group id, stay reserved)."""
    if child.returncode is not None:
        return True
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return child.poll() is not None
    try:
        return waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped elsewhere
        return True


async def _wait_for_exit(child: subprocess.Popen[bytes], timeout_seconds: float) -> None:
    """Wait (without reaping) until the child ends, at most `timeout_seconds`."""
    step = 0.02
    for _ in range(max(1, int(timeout_seconds / step))):
        if _has_exited(child):
            return
        await asyncio.sleep(step)


def _is_same_live_process(record: UnitRecord) -> bool:
    """An adopted unit: its process exists, is not a zombie, started when the record says, and is a worker
    of that unit (its settings name the unit), so a stale or forged record never makes us signal a stranger."""
    try:
        process = psutil.Process(record.pid)
        if abs(process.create_time() - record.process_started) > _START_TIME_TOLERANCE_SECONDS:
            return False
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        arguments = process.cmdline()
        if not arguments:  # still inside execve (the arguments are not mapped yet): trust the start time
            return time.time() - record.process_started < _EXEC_WINDOW_SECONDS
        unit_marker = f'-{record.unit_id}"'  # the end of the worker type in the worker's JSON settings
        return any(unit_marker in part for part in arguments)
    except psutil.Error:
        return False


def _signal_process(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
