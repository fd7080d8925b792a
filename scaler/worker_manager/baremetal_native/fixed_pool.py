"""A fixed pool of local workers (`scaler_cluster`, `scaler_worker_manager baremetal_native --mode fixed`).

Starts N worker processes and waits. SIGINT/SIGTERM make every worker leave the scheduler
gracefully, then the pool exits; a worker that dies is not replaced (that is the dynamic mode's job).
The pool exits when all its workers have exited, with their exit code when it is not 0 (`pool_exit_code`: 2 when no
scheduler answered any of them, 3 when they lost it, 1 for a mix), so a pool none of whose workers could run does
not end as a success.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from types import FrameType

from scaler.config.sections import WorkerConfig
from scaler.io.child_processes import describe_exit, start_python_child, stop_children
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.worker.process import check_worker_config, worker_config_to_json

logger = logging.getLogger(__name__)

#: How long workers get to leave the scheduler before they are killed.
STOP_GRACE_SECONDS = 10.0


def start_workers(config: WorkerConfig, count: int) -> list[subprocess.Popen[bytes]]:
    encoded = worker_config_to_json(config)
    return [start_python_child(["scaler.worker.process", encoded]) for _ in range(count)]


def pool_exit_code(codes: list[int]) -> int:
    """The exit code of a pool whose workers all exited by themselves: 0 when they all did so cleanly (a cluster
    shutdown); their code when they share one (2: no scheduler answered, 3: the scheduler was lost); else 1."""
    failed = {code for code in codes if code != ExitCode.OK}
    if not failed:
        return ExitCode.OK
    (only,) = failed if len(failed) == 1 else (ExitCode.ERROR,)
    return only if only > 0 else ExitCode.ERROR  # killed by a signal: an error


def run_worker_pool(config: WorkerConfig, count: int, stop_on_worker_death: bool = False) -> int:
    """Run `count` workers until they all exit or a signal comes. `stop_on_worker_death`: a worker that dies
    stops the pool with exit code 1 (a cloud unit is replaced whole rather than run short of a worker)."""
    problem = check_worker_config(config)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
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
            if stopping:  # Ctrl-C in a terminal reaches the workers too: their exits are this stop, not news
                break
            for worker in list(running):
                if worker.poll() is not None:
                    if stopping:  # Ctrl-C in a terminal reached the workers too (one process group): not news
                        break
                    running.remove(worker)
                    # exit code 0: the scheduler told it to stop (a cluster shutdown), no news to warn of
                    (logger.warning if worker.returncode else logger.info)(
                        "worker pid %d exited (%s)", worker.pid, describe_exit(worker.returncode)
                    )
                    if stop_on_worker_death:
                        logger.error("a worker of this unit died: stopping the unit, its manager replaces it")
                        return 1
        if stopping:
            logger.info("received %s: stopping %d workers", stopping[0], len(running))
            return ExitCode.OK
        code = pool_exit_code([worker.returncode for worker in workers])
        if code != ExitCode.OK:
            logger.error("every worker of this pool exited, none of them cleanly: exiting with code %d", code)
        return code
    finally:
        stop_children(workers, STOP_GRACE_SECONDS)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main() -> None:
    """`python -m scaler.worker_manager.baremetal_native.fixed_pool '<WorkerConfig as JSON>' COUNT`: what a cloud
    unit (an ECS task, an EC2 instance) runs: COUNT workers, stopping as a whole when one of them dies."""
    import sys

    from scaler.config.logging_setup import setup_logging
    from scaler.config.sections import section_from_json

    config = section_from_json(WorkerConfig, sys.argv[1])
    setup_logging(config, f"unit[{config.worker_type}]")
    sys.exit(run_worker_pool(config, int(sys.argv[2]), stop_on_worker_death=True))


if __name__ == "__main__":
    main()
