"""`scaler_worker_manager baremetal_native --mode dynamic`: local workers started and stopped on the
scheduler's target (the fixed mode is `fixed_pool`). Workers are forked by a worker forker started with
the manager (`worker_forker`), so a scale-up costs forks, not Python start-ups."""

from __future__ import annotations

import logging

from scaler.config.manager_types import manager_type_of
from scaler.config.sections import NativeWorkerManagerConfig
from scaler.io.fork_server import ForkServer
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.worker_manager.backend import LaunchSpec, worker_config_of
from scaler.worker_manager.baremetal_native.backend import NativeBackend
from scaler.worker_manager.baremetal_native.unit_records import state_directory_for
from scaler.worker_manager.baremetal_native.worker_forker import start_worker_forker
from scaler.worker_manager.process import run_manager, settings_problem

logger = logging.getLogger(__name__)


def run_native_manager(config: NativeWorkerManagerConfig) -> int:
    worker_type = config.worker_type or manager_type_of(config).worker_type
    problem = settings_problem(config, worker_type)
    if problem is not None:  # before the worker forker starts
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    spec = LaunchSpec(config.worker_manager_id, worker_config_of(config, worker_type))
    state_directory = state_directory_for(config.worker_manager_id, spec.scheduler_address)
    backend = NativeBackend(config.worker_manager_id, state_directory, forker=_start_forker(spec))
    return run_manager(config, backend, worker_type)


def _start_forker(spec: LaunchSpec) -> ForkServer | None:
    """The worker forker, started now so that it has its imports done when the first target arrives."""
    try:
        return start_worker_forker(spec.worker)
    except OSError as error:
        logger.warning("could not start the worker forker (%s): workers will start as new processes", error)
        return None
