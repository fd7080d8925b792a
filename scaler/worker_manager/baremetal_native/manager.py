"""`scaler_worker_manager baremetal_native`: the fixed pool (`--mode fixed`) or the dynamic manager."""

from __future__ import annotations

import sys

from scaler.config.sections import NativeWorkerManagerConfig, WorkerManagerSettings
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.worker_manager.backend import worker_config_of


def run(config: WorkerManagerSettings) -> int:
    assert isinstance(config, NativeWorkerManagerConfig)
    if config.mode == "fixed":
        from scaler.worker_manager.baremetal_native.fixed_pool import run_worker_pool

        if config.max_task_concurrency < 1:
            print(
                "scaler_worker_manager: fixed mode needs --max-task-concurrency (or -n) of at least 1", file=sys.stderr
            )
            return EXIT_CONFIGURATION
        return run_worker_pool(worker_config_of(config, config.worker_type or "FIX"), config.max_task_concurrency)
    from scaler.worker_manager.baremetal_native.dynamic import run_native_manager

    return run_native_manager(config)
