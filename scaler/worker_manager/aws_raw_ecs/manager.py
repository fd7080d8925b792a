"""`scaler_worker_manager aws_raw_ecs`: the shared runner around the ECS backend."""

from __future__ import annotations

import logging

from scaler.config.sections import ECSWorkerManagerConfig, WorkerManagerSettings
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.worker_manager.aws.client import AwsClients, CloudError
from scaler.worker_manager.aws.units import start_problem
from scaler.worker_manager.aws_raw_ecs.backend import EcsBackend, fargate_size_problem
from scaler.worker_manager.process import run_manager

logger = logging.getLogger(__name__)


def run(config: WorkerManagerSettings) -> int:
    assert isinstance(config, ECSWorkerManagerConfig)
    problem = fargate_size_problem(config.ecs_task_cpu, config.ecs_task_memory)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    try:
        clients = AwsClients(
            config.aws_region, config.aws_access_key_id, config.aws_secret_access_key, config.aws_endpoint_url
        )
    except CloudError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    # refused before anything is launched: another Python than the client's, a package the units cannot install
    problem, environment = start_problem(
        config, "ecs_python_version", config.ecs_python_version, config.ecs_python_requirements
    )
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    return run_manager(config, EcsBackend(config, config.worker_manager_id, clients, environment))
