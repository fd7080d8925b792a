"""The cluster host: one fresh interpreter that imports the runtime once and forks the processes of a
local cluster (object storage, scheduler, workers) from it.

Starting a Python interpreter and importing zmq, capnp and asyncio costs a few hundred milliseconds
of CPU; a fork costs a few. The host forks before it creates any thread, event loop or socket, so
each child starts clean. The host tells its parent the children's pids (one JSON line on a pipe),
then watches them. SIGTERM/SIGINT stop them in order (workers, scheduler, object storage), and every
child dies with the host (PR_SET_PDEATHSIG), so nothing outlives it.

    python -m scaler.cluster.host '<plan as JSON>' <fd of the pid pipe>
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

from scaler.cluster.child_processes import describe_exit, name_this_process
from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, WorkerConfig, section_from_json
from scaler.worker.zygote import die_with_parent

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 5.0


def fork_child(name: str, run: Callable[[], int]) -> int:
    """Fork a child that runs `run()` and exits with its code; returns the child's pid."""
    pid = os.fork()
    if pid != 0:
        return pid
    code = 1
    try:
        die_with_parent()
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
    plan = json.loads(sys.argv[1])
    report_fd = int(sys.argv[2])
    from scaler.config.logging_setup import setup_logging
    from scaler.object_storage.server import run_object_storage_server
    from scaler.scheduler.process import run_scheduler
    from scaler.worker.process import run_worker

    storage = section_from_json(ObjectStorageServerConfig, plan["object_storage_server"])
    scheduler = section_from_json(SchedulerConfig, plan["scheduler"])
    worker = section_from_json(WorkerConfig, plan["worker"])
    setup_logging(scheduler, "cluster")
    die_with_parent()
    name_this_process("scaler-host")

    def configured(component: str, config: object, run: Callable[[], int]) -> Callable[[], int]:
        def start() -> int:
            setup_logging(config, component)  # type: ignore[arg-type]
            return run()

        return start

    pids = {
        "object_storage_server": fork_child(
            "scaler-storage", configured("object_storage_server", storage, lambda: run_object_storage_server(storage))
        ),
        "scheduler": fork_child(
            "scaler-scheduler", configured("scheduler", scheduler, lambda: run_scheduler(scheduler))
        ),
        "workers": [
            fork_child("scaler-worker", configured("worker", worker, lambda: run_worker(worker)))
            for _ in range(int(plan["n_workers"]))
        ],
    }
    with os.fdopen(report_fd, "w") as report:
        report.write(json.dumps(pids) + "\n")
    sys.exit(_watch(pids))


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
