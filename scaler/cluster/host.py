"""The cluster host: one fresh interpreter that imports the runtime once and forks the processes of a
local cluster (object storage, scheduler, workers) from it.

Starting a Python interpreter and importing zmq, capnp and asyncio costs a few hundred milliseconds
of CPU; a fork costs a few. The host forks before it creates any thread, event loop or socket, so
each child starts clean. The host tells its parent the children's pids (one JSON line on a pipe),
then watches them. SIGTERM/SIGINT stop them in order (workers, scheduler, object storage), and every
child dies with the host (PR_SET_PDEATHSIG), so nothing outlives it.

    python -m scaler.cluster.host '<plan as JSON>' <fd of the pid pipe>

When the process creating the cluster has a single OS thread (ZeroMQ's native threads count), the
host is forked from it instead (`fork_host`), and `import_runtime()` has made the imports already.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, WorkerConfig, section_from_json
from scaler.io.child_processes import describe_exit, name_this_process, set_parent_death_signal

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 5.0


def fork_child(name: str, run: Callable[[], int]) -> int:
    """Fork a child that runs `run()` and exits with its code; returns the child's pid."""
    pid = os.fork()
    if pid != 0:
        return pid
    code = 1
    try:
        set_parent_death_signal()
        name_this_process(name)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        code = run()
    except BaseException:
        logger.exception("%s failed", name)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    sys.exit(run_host(json.loads(sys.argv[1]), int(sys.argv[2])))


def run_host(plan: dict[str, Any], report_fd: int) -> int:
    """Fork the cluster's processes, report their pids on `report_fd`, watch them; the exit code. What the children
    run is imported here first, once (a fresh host's workers each imported their agent and processor modules after
    the fork, and the scheduler its server: about 0.04 s of CPU a worker)."""
    import_runtime()
    from scaler.config.logging_setup import setup_logging
    from scaler.io.process_profiling import run_profiled
    from scaler.object_storage.server import run_object_storage_server
    from scaler.scheduler.process import run_scheduler
    from scaler.worker.process import run_worker

    storage = section_from_json(ObjectStorageServerConfig, plan["object_storage_server"])
    scheduler = section_from_json(SchedulerConfig, plan["scheduler"])
    worker = section_from_json(WorkerConfig, plan["worker"])
    setup_logging(scheduler, "cluster")
    set_parent_death_signal()
    name_this_process("scaler-host")

    def configured(component: str, config: object, run: Callable[[], int]) -> Callable[[], int]:
        def start() -> int:
            setup_logging(config, component)  # type: ignore[arg-type]
            return run_profiled(component.lower(), run)  # SCALER_PROFILE_DIR, as `python -m` components do

        return start

    pids = {
        "object_storage_server": fork_child(
            "scaler-storage", configured("object_storage_server", storage, lambda: run_object_storage_server(storage))
        ),
        "scheduler": fork_child(
            "scaler-scheduler", configured("Scheduler", scheduler, lambda: run_scheduler(scheduler))
        ),
        "workers": [
            fork_child("scaler-worker", configured("worker", each, functools.partial(run_worker, each)))
            for each in workers_of(worker, plan)
        ],
    }
    with os.fdopen(report_fd, "w") as report:
        report.write(json.dumps(pids) + "\n")
    return _watch(pids)


def workers_of(worker: WorkerConfig, plan: dict[str, Any]) -> list[WorkerConfig]:
    """The settings of each of the plan's workers: `worker`, with each one's own capabilities where the plan gives
    them (`worker_capabilities`, one setting per worker)."""
    own = plan.get("worker_capabilities")
    if own is None:
        return [worker] * int(plan["n_workers"])
    return [dataclasses.replace(worker, per_worker_capabilities=capabilities) for capabilities in own]


# ---------------------------------------------------------------- starting the host


def import_runtime() -> None:
    """Import what the host's children run, so that a host forked from this process needs no import."""
    import scaler.config.logging_setup
    import scaler.object_storage.server
    import scaler.scheduler.process
    import scaler.scheduler.server
    import scaler.worker.agent.shell
    import scaler.worker.process
    import scaler.worker.processor.process  # noqa: F401


def os_thread_count() -> int:
    """Threads of this process as the OS sees them (ZeroMQ's I/O threads included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 2  # unknown: assume threads, so that nobody forks


class ForkedHost:
    """A host forked from this process, with the part of the Popen interface the callers use."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"cluster host {self.pid}", timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def fork_host(plan: dict[str, Any], report_fd: int) -> ForkedHost:
    """Fork the host from this process; only safe while the process has a single OS thread."""
    pid = os.fork()
    if pid != 0:
        return ForkedHost(pid)
    code = 1
    try:
        os.setpgid(0, 0)  # a Ctrl-C in the parent's terminal reaches the parent only; it stops the cluster
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        code = run_host(plan, report_fd)
    except BaseException:
        logger.exception("the cluster host failed")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _watch(pids: dict[str, object]) -> int:
    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    workers = list(pids["workers"])  # type: ignore[call-overload]
    ordered = [*workers, pids["scheduler"], pids["object_storage_server"]]
    alive = set(ordered)
    while not stopping and alive:
        _reap(alive, report=True)
        time.sleep(0.1)
    for group in (workers, [pids["scheduler"]], [pids["object_storage_server"]]):
        _stop(group, alive)
    return 0


def _reap(alive: set[object], report: bool) -> None:
    while alive:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            alive.clear()
            return
        if pid == 0:
            return
        alive.discard(pid)
        if report:
            code = os.waitstatus_to_exitcode(status)
            logger.warning("cluster process %d exited (%s)", pid, describe_exit(code))


def _stop(group: list[object], alive: set[object]) -> None:
    members = [pid for pid in group if pid in alive]
    for pid in members:
        try:
            os.kill(pid, signal.SIGTERM)  # type: ignore[arg-type]
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while any(pid in alive for pid in members) and time.monotonic() < deadline:
        _reap(alive, report=False)
        time.sleep(0.02)
    for pid in members:
        if pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
            except ProcessLookupError:
                pass
    while any(pid in alive for pid in members):
        _reap(alive, report=False)
        time.sleep(0.01)


if __name__ == "__main__":
    main()
