"""A fixed pool of local workers (`scaler_cluster`, `scaler_worker_manager baremetal_native --mode fixed`).

Starts N worker processes and waits. SIGINT/SIGTERM make every worker leave the scheduler
gracefully, then the pool exits; a worker that dies is not replaced (that is the dynamic mode's job).
The pool exits when all its workers have exited.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from types import FrameType

from scaler.config.sections import WorkerConfig
from scaler.io.child_processes import describe_exit, start_python_child, stop_children
from scaler.protocol.exit_codes import ExitCode
from scaler.worker.process import check_worker_config, worker_config_to_json

logger = logging.getLogger(__name__)

#: How long workers get to leave the scheduler before they are killed.
STOP_GRACE_SECONDS = 10.0


def start_workers(config: WorkerConfig, count: int) -> list[subprocess.Popen[bytes]]:
    encoded = worker_config_to_json(config)
    return [start_python_child(["scaler.worker.process", encoded]) for _ in range(count)]


def run_worker_pool(config: WorkerConfig, count: int) -> int:
    problem = check_worker_config(config)
    if problem is not None:
        logger.error("%s", problem)
        return ExitCode.ERROR
    logger.info(
        "starting %d workers for %s (heartbeat %gs, death timeout %gs)",
        count, config.scheduler_address, config.heartbeat_interval_seconds, config.death_timeout_seconds,
    )  # fmt: skip
    workers = start_workers(config, count)
    stopping: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        running = list(workers)
        while running and not stopping:
            time.sleep(0.2)
            for worker in list(running):
                if worker.poll() is not None:
                    logger.warning("worker pid %d exited (%s)", worker.pid, describe_exit(worker.returncode))
                    running.remove(worker)
        if stopping:
            logger.info("received %s: stopping %d workers", stopping[0], len(running))
        return ExitCode.OK
    finally:
        stop_children(workers, STOP_GRACE_SECONDS)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
