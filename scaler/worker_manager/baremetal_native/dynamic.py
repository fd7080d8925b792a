"""`scaler_worker_manager baremetal_native --mode dynamic`: local workers started and stopped on the
scheduler's target (the fixed mode is `fixed_pool`). Workers are forked by a worker forker started with
the manager (`worker_forker`), so a scale-up costs forks, not Python start-ups."""

from __future__ import annotations

import asyncio
import logging

from scaler.config.sections import NativeWorkerManagerConfig
from scaler.io.address import AddressError, parse_address
from scaler.io.event_loop import new_event_loop
from scaler.io.fork_server import ForkServer
from scaler.policy.capability import parse_capabilities
from scaler.protocol.scheduler_link import ExitCode
from scaler.worker.process import check_worker_config
from scaler.worker_manager.backend import LaunchSpec, worker_config_of
from scaler.worker_manager.baremetal_native.backend import NativeBackend
from scaler.worker_manager.baremetal_native.unit_records import state_directory_for
from scaler.worker_manager.baremetal_native.worker_forker import start_worker_forker
from scaler.worker_manager.runner import ManagerRunner, RunnerSettings

logger = logging.getLogger(__name__)

MANAGER_TYPE = "baremetal_native"
DEFAULT_WORKER_TYPE = "NAT"


def run_native_manager(config: NativeWorkerManagerConfig) -> int:
    problem = _check(config)
    if problem is not None:
        logger.error("%s", problem)
        return ExitCode.CONFIGURATION
    spec = LaunchSpec(config.worker_manager_id, worker_config_of(config, config.worker_type or DEFAULT_WORKER_TYPE))
    settings = RunnerSettings(
        scheduler_address=config.scheduler_address,
        manager_id=config.worker_manager_id,
        manager_type=MANAGER_TYPE,
        capabilities=parse_capabilities(config.per_worker_capabilities),
        max_workers=None if config.max_task_concurrency == -1 else config.max_task_concurrency,
        heartbeat_interval_seconds=config.heartbeat_interval_seconds,
        scheduler_timeout_seconds=config.death_timeout_seconds,
        scale_down_cooldown_seconds=config.scale_down_cooldown_seconds,
        io_threads=config.io_threads,
    )
    state_directory = state_directory_for(config.worker_manager_id, spec.scheduler_address)
    backend = NativeBackend(config.worker_manager_id, state_directory, forker=_start_forker(spec))
    loop = new_event_loop(config.event_loop)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(ManagerRunner(settings, backend, spec).run())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _start_forker(spec: LaunchSpec) -> ForkServer | None:
    """The worker forker, started now so that it has its imports done when the first target arrives."""
    try:
        return start_worker_forker(spec.worker)
    except OSError as error:
        logger.warning("could not start the worker forker (%s): workers will start as new processes", error)
        return None


def _check(config: NativeWorkerManagerConfig) -> str | None:
    """Why these settings cannot run a dynamic native manager, or None."""
    if not config.worker_manager_id.strip():
        return "--worker-manager-id must not be empty"
    if "|" in (config.worker_type or ""):
        return f"--worker-type {config.worker_type!r} must not contain '|'"
    try:
        parse_address(config.scheduler_address)
        parse_capabilities(config.per_worker_capabilities)
    except (AddressError, ValueError) as error:
        return str(error)
    return check_worker_config(worker_config_of(config, config.worker_type or DEFAULT_WORKER_TYPE))
