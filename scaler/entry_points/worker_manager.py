"""`scaler_worker_manager TYPE [options] SCHEDULER_ADDRESS`: start a worker manager of one type."""

from __future__ import annotations

import dataclasses
import socket
import sys
from collections.abc import Sequence

from scaler.config.loader import load_worker_manager
from scaler.config.sections import NativeWorkerManagerConfig, WorkerManagerSettings
from scaler.worker_manager.backend import worker_config_of


def main(argv: Sequence[str] | None = None) -> int:
    config = with_manager_id(load_worker_manager(argv))
    from scaler.config.logging_setup import setup_logging

    setup_logging(config, f"worker_manager[{config.worker_manager_id}]")
    return run_worker_manager(config)


def run_worker_manager(config: WorkerManagerSettings) -> int:
    """Run the manager these settings describe (also used by `scaler FILE`)."""
    config = with_manager_id(config)
    if isinstance(config, NativeWorkerManagerConfig):
        return _run_native(config)
    print(f"scaler_worker_manager: {type(config).__name__} is not available in this version", file=sys.stderr)
    return 2


def with_manager_id(config: WorkerManagerSettings) -> WorkerManagerSettings:
    """A manager started without --worker-manager-id is `<type>@<host name>` (stable across restarts,
    so it adopts its workers; a second one on the same host is refused as a duplicate, with a message)."""
    if config.worker_manager_id:
        return config
    from scaler.config.sections import WORKER_MANAGER_SECTIONS

    type_name = next(name for name, kind in WORKER_MANAGER_SECTIONS.items() if kind is type(config))
    return dataclasses.replace(config, worker_manager_id=f"{type_name}@{socket.gethostname()}")


def _run_native(config: NativeWorkerManagerConfig) -> int:
    if config.mode == "fixed":
        from scaler.cluster.worker_pool import run_worker_pool

        if config.max_task_concurrency < 1:
            print(
                "scaler_worker_manager: fixed mode needs --max-task-concurrency (or -n) of at least 1", file=sys.stderr
            )
            return 2
        return run_worker_pool(worker_config_of(config, config.worker_type or "FIX"), config.max_task_concurrency)
    from scaler.worker_manager.native import run_native_manager

    return run_native_manager(config)


if __name__ == "__main__":
    raise SystemExit(main())
