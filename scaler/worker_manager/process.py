"""Running a worker manager process from its settings: what every type shares (checks, runner settings,
the event loop), and `python -m scaler.worker_manager.process TYPE '<settings as JSON>'`, how `scaler FILE`
starts a manager without paying for the command line's config loader."""

from __future__ import annotations

import asyncio
import logging
import sys

from scaler.config.logging_setup import setup_logging
from scaler.config.manager_types import MANAGER_TYPES, manager_type_of
from scaler.config.sections import WorkerManagerSettings, section_from_json
from scaler.io.address import AddressError, parse_address
from scaler.io.event_loop import close_loop, new_event_loop
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.tls import TlsFileError
from scaler.policy.capability import parse_capabilities
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.security.curve import security_of
from scaler.security.key_files import KeyFileError
from scaler.security.tls_settings import trust_settings
from scaler.worker.process import check_worker_config
from scaler.worker_manager.backend import LaunchSpec, UnitBackend, worker_config_of
from scaler.worker_manager.runner import ManagerRunner, RunnerSettings

logger = logging.getLogger(__name__)


def settings_problem(config: WorkerManagerSettings, worker_type: str) -> str | None:
    """Why these settings cannot run a manager (whatever its type), or None."""
    if not config.worker_manager_id.strip():
        return "--worker-manager-id must not be empty"
    if "|" in worker_type:
        return f"--worker-type {worker_type!r} must not contain '|'"
    try:
        parse_address(config.scheduler_address)
        if config.worker_scheduler_address:
            parse_address(config.worker_scheduler_address)
        parse_capabilities(config.per_worker_capabilities)
    except (AddressError, ValueError) as error:
        return str(error)
    return check_worker_config(worker_config_of(config, worker_type))


def runner_settings(config: WorkerManagerSettings, manager_type: str) -> RunnerSettings:
    return RunnerSettings(
        scheduler_address=config.scheduler_address,
        manager_id=config.worker_manager_id,
        manager_type=manager_type,
        capabilities=parse_capabilities(config.per_worker_capabilities),
        max_workers=None if config.max_task_concurrency == -1 else config.max_task_concurrency,
        heartbeat_interval_seconds=config.heartbeat_interval_seconds,
        scheduler_timeout_seconds=config.death_timeout_seconds,
        scale_down_cooldown_seconds=config.scale_down_cooldown_seconds,
        billing_granularity_seconds=config.billing_granularity_seconds,
        billing_minimum_seconds=config.billing_minimum_seconds,
        pending_timeout_seconds=config.boot_timeout_seconds,
        io_threads=config.io_threads,
        worker_cost_per_hour=config.worker_cost_per_hour,
        expected_boot_seconds=None if config.expected_boot_seconds < 0 else config.expected_boot_seconds,
        min_workers=config.min_workers,
        buffer_workers=config.buffer_workers,
        max_waiting_units=config.max_waiting_units,
    )


def run_manager(config: WorkerManagerSettings, backend: UnitBackend, worker_type: str | None = None) -> int:
    """Check the settings, then run the shared runner around `backend` until the manager stops. The manager type
    and its workers' id prefix are those of the settings' row of `MANAGER_TYPES`; `worker_type` overrides the
    prefix (a native manager's --worker-type)."""
    row = manager_type_of(config)
    worker_type = worker_type or row.worker_type
    problem = settings_problem(config, worker_type)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    try:
        security = security_of(config)
        trust_settings(config)
    except (KeyFileError, TlsFileError) as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    spec = LaunchSpec(config.worker_manager_id, worker_config_of(config, worker_type), backend.workers_per_unit)
    loop = new_event_loop(config.event_loop)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(
            ManagerRunner(runner_settings(config, row.name), backend, spec, security=security).run()
        )
    except TunnelError as error:  # a tls:// or wss:// scheduler refused for good (a certificate, a proxy)
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    finally:
        asyncio.set_event_loop(None)
        close_loop(loop)


def main() -> None:
    type_name, encoded = sys.argv[1], sys.argv[2]
    from scaler.worker_manager.registry import run_worker_manager, with_manager_id

    config = with_manager_id(section_from_json(MANAGER_TYPES[type_name].section, encoded))
    setup_logging(config, f"worker_manager[{config.worker_manager_id}]")

    sys.exit(run_worker_manager(config))


if __name__ == "__main__":
    main()
