"""`scaler_worker_manager orb_aws_ec2`: the shared runner around the EC2 backend."""

from __future__ import annotations

import logging

from scaler.config.sections import EC2WorkerManagerConfig, WorkerManagerSettings
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.worker_manager.aws.client import AwsClients, CloudError
from scaler.worker_manager.aws.units import start_problem
from scaler.worker_manager.orb_aws_ec2.backend import Ec2Backend
from scaler.worker_manager.process import run_manager

logger = logging.getLogger(__name__)

MANAGER_TYPE = "orb_aws_ec2"
WORKER_TYPE = "EC2"


def run(config: WorkerManagerSettings) -> int:
    assert isinstance(config, EC2WorkerManagerConfig)
    if config.spot_max_price is not None and config.market_type != "spot":
        logger.error(
            "--spot-max-price %g: only spot instances have one (add --market-type spot)", config.spot_max_price
        )
        return EXIT_CONFIGURATION
    try:
        clients = AwsClients(
            config.aws_region, config.aws_access_key_id, config.aws_secret_access_key, config.aws_endpoint_url,
            config.aws_profile,
        )  # fmt: skip
    except CloudError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    # refused before anything is launched: another Python than the client's, a package the units cannot install
    problem, environment = start_problem(config, "python_version", config.python_version, config.requirements_txt)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    backend = Ec2Backend(config, config.worker_manager_id, clients, environment)
    backend.prepare_now()
    return run_manager(config, MANAGER_TYPE, WORKER_TYPE, backend)
