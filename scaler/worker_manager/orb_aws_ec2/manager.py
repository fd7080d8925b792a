"""`scaler_worker_manager orb_aws_ec2`: the shared runner around the EC2 backend."""

from __future__ import annotations

import logging

from scaler.config.sections import EC2WorkerManagerConfig, WorkerManagerSettings
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.worker_manager.aws.client import AwsClients, CloudError
from scaler.worker_manager.aws.units import start_problem
from scaler.worker_manager.orb_aws_ec2.backend import Ec2Backend
from scaler.worker_manager.process import run_manager
from scaler.worker_manager.ship.distributions import this_python

logger = logging.getLogger(__name__)

#: The Python versions Amazon Linux 2023 (the default AMI) has or installs with dnf (python3 is 3.9).
AMAZON_LINUX_2023_PYTHONS = ("3.9", "3.11", "3.12", "3.13", "3.14")


def default_ami_problem(image_id: str | None, python: str | None = None, setting: str = "--image-id") -> str | None:
    """Why the default AMI cannot run the client's Python (None: it can, or another AMI is given). `setting`: how
    the reader gives another AMI (the flag, or the key of a file)."""
    python = python or this_python()
    if image_id is not None or python in AMAZON_LINUX_2023_PYTHONS:
        return None
    return (
        f"the client runs Python {python}, which Amazon Linux 2023 (the default AMI) neither has nor installs "
        f"(it offers {', '.join(AMAZON_LINUX_2023_PYTHONS)}): give {setting} an AMI with python{python}, or run the "
        "clients and the manager with one of those versions"
    )


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
    # refused before anything is launched: another Python than the client's, one the default AMI cannot install,
    # a package the units cannot install
    problem = default_ami_problem(config.image_id)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    problem, environment = start_problem(config, "python_version", config.python_version, config.requirements_txt)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    backend = Ec2Backend(config, config.worker_manager_id, clients, environment)
    backend.prepare_now()
    return run_manager(config, backend)
