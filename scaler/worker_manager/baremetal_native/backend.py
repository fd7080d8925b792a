"""The local-process backend: one unit = one worker process on this machine.

- launch: a worker agent in a new session, so that it leads a process group holding its zygote and
  processors: forked by the manager's worker forker when there is one (`worker_forker`: milliseconds),
  else started as `python -m scaler.worker.process '<WorkerConfig>'`. The worker type is
  `<prefix>-<unit id>`, which puts the unit id into the worker id (see `scaler.worker_manager.backend`).
  Units do not die with the manager: a manager that crashed and restarts adopts them (`unit_records`).
- list_units: the units recorded for this manager whose process still runs (same pid *and* start time,
  and the process is that unit's worker).
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

from scaler.config.sections import section_to_json
from scaler.io.child_processes import describe_exit, start_python_child
from scaler.io.fork_server import ForkServer, describe_wait_status
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.baremetal_native.unit_records import UnitRecord, UnitRecords
from scaler.worker_manager.baremetal_native.worker_forker import worker_process_name

logger = logging.getLogger(__name__)

#: How long a worker gets to leave the scheduler before its process group is killed.
DEFAULT_GRACE_SECONDS = 10.0
#: Tolerance when comparing a process's start time with the recorded one.
_START_TIME_TOLERANCE_SECONDS = 0.05
#: How long after its start a process may still show no command line (its execve is not finished).
_EXEC_WINDOW_SECONDS = 5.0
#: How long a launch waits for the worker forker to report its forks (it may still be importing).
FORKER_REPORT_TIMEOUT_SECONDS = 30.0

#: Handles of units left running by `close()` (for the next manager to adopt). Kept so that Python does
#: not warn about child processes still running when their handles are collected.
_LEFT_RUNNING: list[subprocess.Popen[bytes]] = []


class NativeBackend:
    def __init__(
        self,
        manager_id: str,
        state_directory: Path,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        forker: ForkServer | None = None,
        workers_per_unit: int = 1,
    ) -> None:
        """`workers_per_unit`: the task slots of one unit's worker (an offloading proxy has many)."""
        self._manager_id = manager_id
        self._workers_per_unit = workers_per_unit
        self._records = UnitRecords(state_directory)
        self._grace_seconds = grace_seconds
        #: the worker forker (owned: closed by `close`); None: workers start as new interpreters
        self._forker = forker
        #: units this instance started as commands: their handles (to reap them)
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        #: units this instance had forked, by unit id: the forker reaps them and reports their exits
        self._forked: set[str] = set()
        self._fork_pids: dict[str, int] = {}  #: "started" reports not yet taken by `launch`
        self._fork_exits: dict[str, int] = {}  #: "exited" reports: wait status by unit id
        #: units being stopped -> the timer that forces the stop
        self._stopping: dict[str, asyncio.TimerHandle] = {}
        self._known: dict[str, UnitRecord] = {}  #: latest records seen or written, by unit id

    @property
    def workers_per_unit(self) -> int:
        return self._workers_per_unit

    # ------------------------------------------------------------ the contract

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        if spec.manager_id != self._manager_id:
            raise ValueError(f"this backend serves manager {self._manager_id!r}, not {spec.manager_id!r}")
        unit_ids = await self._fork_units(count, spec) if self._forker is not None else []
        if len(unit_ids) < count:
            unit_ids += self._start_units(count - len(unit_ids), spec, partial_ok=bool(unit_ids))
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
            if record.unit_id in self._stopping:
                await self._wait_for_exit(record)
            if not self._is_running(record):
                self._collect(record)
        _LEFT_RUNNING.extend(self._children.values())
        self._children.clear()
        self._stopping.clear()
        if self._forker is not None:
            self._forker.close()  # the units it forked keep running: they lead their own sessions
            self._forker = None
        self._records.remove_directory_if_empty()

    async def _wait_for_exit(self, record: UnitRecord) -> None:
        """Wait (without reaping) until the unit's worker ends, at most the grace period."""
        step = 0.02
        for _ in range(max(1, int(self._grace_seconds / step))):
            self._read_forker_reports()
            if not self._is_running(record):
                return
            await asyncio.sleep(step)

    # ------------------------------------------------------------ processes

    async def _fork_units(self, count: int, spec: LaunchSpec) -> list[str]:
        """Units forked by the worker forker: as many as it reported started (fewer if it died or hung)."""
        assert self._forker is not None
        requested: list[str] = []
        for _ in range(count):
            unit_id = uuid.uuid4().hex[:12]
            try:
                self._forker.request(unit_id.encode(), section_to_json(spec.worker_config(unit_id)).encode())
            except OSError as error:
                self._lose_forker(f"it does not take requests ({error})")
                break
            requested.append(unit_id)
        deadline = time.monotonic() + FORKER_REPORT_TIMEOUT_SECONDS
        self._read_forker_reports()
        while self._forker is not None and not all(unit_id in self._fork_pids for unit_id in requested):
            if time.monotonic() > deadline:
                self._lose_forker(f"it reported no fork within {FORKER_REPORT_TIMEOUT_SECONDS:g} s", kill=True)
                break
            await asyncio.sleep(0.005)
            self._read_forker_reports()
        unit_ids = []
        for unit_id in requested:
            pid = self._fork_pids.pop(unit_id, None)
            if pid is not None:
                self._remember(UnitRecord(unit_id, self._manager_id, pid, _start_time(pid), time.time()))
                self._forked.add(unit_id)
                unit_ids.append(unit_id)
        return unit_ids

    def _start_units(self, count: int, spec: LaunchSpec, partial_ok: bool) -> list[str]:
        """Units started as new interpreters."""
        unit_ids: list[str] = []
        for _ in range(count):
            unit_id = uuid.uuid4().hex[:12]
            try:
                child = start_python_child(spec.worker_module_args(unit_id), new_session=True, die_with_parent=False)
            except OSError:
                if not (unit_ids or partial_ok):
                    raise
                logger.exception("could not start a worker process; %d of %d started", len(unit_ids), count)
                break
            self._children[unit_id] = child
            self._remember(UnitRecord(unit_id, self._manager_id, child.pid, _start_time(child.pid), time.time()))
            unit_ids.append(unit_id)
        return unit_ids

    def _remember(self, record: UnitRecord) -> None:
        self._known[record.unit_id] = record
        self._records.save(record)
        logger.debug("unit %s: worker pid %d", record.unit_id, record.pid)

    def _read_forker_reports(self) -> None:
        if self._forker is None:
            return
        for kind, child_id, number in self._forker.read_reports():
            if kind == "started":
                self._fork_pids[child_id.decode()] = number
            elif kind == "exited":
                self._fork_exits[child_id.decode()] = number
            else:
                self._lose_forker("it exited")
                return

    def _lose_forker(self, why: str, kill: bool = False) -> None:
        """Stop using the forker: new workers start as new interpreters; its running units stay (they are
        watched like adopted ones from now on)."""
        assert self._forker is not None
        logger.warning("the worker forker is unusable (%s): starting workers as new processes from now on", why)
        if kill:
            self._forker.kill()
        self._forker.close()
        self._forker = None

    def _current_records(self) -> list[UnitRecord]:
        """The recorded units of this manager, and the ones this instance started even if their record is gone."""
        self._read_forker_reports()
        records = {r.unit_id: r for r in self._records.load_all() if r.manager_id == self._manager_id}
        for unit_id in [*self._children, *self._forked]:
            if unit_id not in records and unit_id in self._known:
                records[unit_id] = self._known[unit_id]
        self._known.update(records)
        return sorted(records.values(), key=lambda record: (record.created_at, record.unit_id))

    def _is_running(self, record: UnitRecord) -> bool:
        child = self._children.get(record.unit_id)
        if child is not None:
            return not _has_exited(child)
        if record.unit_id in self._fork_exits:
            return False
        if record.unit_id in self._forked and self._forker is not None:
            return True  # the forker reports its exit
        return _is_same_live_process(record)

    def _force_stop(self, record: UnitRecord) -> None:
        self._read_forker_reports()
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
        self._forked.discard(record.unit_id)
        status = self._fork_exits.pop(record.unit_id, None)
        if status is not None:
            detail = f"pid {record.pid}: {describe_wait_status(status)}"
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


def _is_same_live_process(record: UnitRecord) -> bool:
    """An adopted unit: its process exists, is not a zombie, started when the record says, and is a worker
    of that unit (forked: named after the unit; started as a command: its settings name the unit), so a
    stale or forged record never makes us signal a stranger."""
    try:
        process = psutil.Process(record.pid)
        if abs(process.create_time() - record.process_started) > _START_TIME_TOLERANCE_SECONDS:
            return False
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if process.name() == worker_process_name(record.unit_id):
            return True
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
