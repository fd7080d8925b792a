"""The launcher's handle on what a file's cloud managers run in the cloud: their backends, built from the same
settings (for the hub and for `scaler FILE --down`). The AWS modules are imported only when a file has cloud
managers, so a local stack never imports boto3."""

from __future__ import annotations

import dataclasses
import importlib.metadata
from typing import Any

from scaler.config.loader import LauncherFile
from scaler.config.sections import EC2WorkerManagerConfig, ECSWorkerManagerConfig, WorkerManagerSettings

#: The hub unit's size: the smallest Fargate task our ECS manager takes, a small instance on EC2.
HUB_ECS_CPU, HUB_ECS_MEMORY_GB = 1, 2
HUB_INSTANCE_TYPE = "t3.small"


def cloud_managers(file: LauncherFile) -> list[WorkerManagerSettings]:
    """The file's managers whose units run in the cloud (ECS, EC2), in file order."""
    return [manager for manager in file.worker_managers if isinstance(manager, (ECSWorkerManagerConfig,
                                                                                EC2WorkerManagerConfig))]  # fmt: skip


def hub_id(manager: WorkerManagerSettings) -> str:
    """The manager id the hub unit is tagged with (its own: the manager never counts it among its units)."""
    return f"{manager.worker_manager_id}-hub"


#: What a hub serving a WebSocket address installs besides this build of scaler: its `websocket` extra (units install
#: without dependencies, so h11, wsproto's own, is named too).
WEBSOCKET_DISTRIBUTIONS = ("wsproto", "h11")


def hub_settings(manager: WorkerManagerSettings, websocket: bool = False) -> WorkerManagerSettings:
    """The settings the hub unit is launched with: the manager's (region, network, image, bucket, lease), a small
    size, and only this build of scaler to install (the hub runs no task), with what a `websocket` address needs
    (at the versions installed here, which the laptop's forwarder uses too)."""
    requirements = "\n".join(_pinned(name) for name in WEBSOCKET_DISTRIBUTIONS) if websocket else ""
    if isinstance(manager, ECSWorkerManagerConfig):
        return dataclasses.replace(
            manager, worker_manager_id=hub_id(manager), ecs_task_cpu=HUB_ECS_CPU, ecs_task_memory=HUB_ECS_MEMORY_GB,
            environment="requirements", ecs_python_requirements=requirements, max_task_concurrency=1,
            ecs_task_definition=f"{manager.ecs_task_definition}-hub",
        )  # fmt: skip
    assert isinstance(manager, EC2WorkerManagerConfig)
    return dataclasses.replace(
        manager, worker_manager_id=hub_id(manager), instance_type=HUB_INSTANCE_TYPE, environment="requirements",
        requirements_txt=requirements or None, max_task_concurrency=1,
    )  # fmt: skip


def _pinned(name: str) -> str:
    try:
        return f"{name}=={importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:  # the launcher refuses a wss:// hub without the extra first
        return name


def backend_of(manager: WorkerManagerSettings, program: Any = None, image_mode: bool = False) -> Any:
    """The backend of a cloud manager's units (its id, its settings). `image_mode`: plan no environment (listing
    and terminating only, as `--down` does)."""
    from scaler.worker_manager.aws.client import AwsClients

    if image_mode and isinstance(manager, (ECSWorkerManagerConfig, EC2WorkerManagerConfig)):
        manager = dataclasses.replace(manager, environment="image")
    if isinstance(manager, ECSWorkerManagerConfig):
        from scaler.worker_manager.aws_raw_ecs.backend import EcsBackend

        clients = AwsClients(manager.aws_region, manager.aws_access_key_id, manager.aws_secret_access_key,
                             manager.aws_endpoint_url)  # fmt: skip
        return EcsBackend(manager, manager.worker_manager_id, clients, program=program)
    assert isinstance(manager, EC2WorkerManagerConfig)
    from scaler.worker_manager.orb_aws_ec2.backend import Ec2Backend

    clients = AwsClients(manager.aws_region, manager.aws_access_key_id, manager.aws_secret_access_key,
                         manager.aws_endpoint_url, manager.aws_profile)  # fmt: skip
    backend = Ec2Backend(manager, manager.worker_manager_id, clients, program=program)
    if not image_mode:
        backend.prepare_now()
    return backend
