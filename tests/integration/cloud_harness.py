"""The fake cloud for tests: one moto server per test session in this process, reset around each test, and
backends of the cloud managers pointed at it.

The session fixture exports `AWS_ENDPOINT_URL` and test credentials, so boto3 in this process and in every
command a test starts (a manager, `scaler FILE`) talks to the fake cloud, as a user's shell would after
`scaler_fake_cloud`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from scaler.config.sections import EC2WorkerManagerConfig, ECSWorkerManagerConfig
from scaler.fake_cloud.cloud import FakeCloud
from scaler.worker_manager.aws.client import AwsClients
from scaler.worker_manager.aws_raw_ecs.backend import EcsBackend
from scaler.worker_manager.backend import LaunchSpec
from scaler.worker_manager.orb_aws_ec2.backend import Ec2Backend

REGION = "us-east-1"
CLOUD_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


def started_fake_cloud(log_directory: Path) -> Iterator[FakeCloud]:
    """A running fake cloud with the environment pointing at it; everything restored afterwards. The stacks'
    own keys and connection files (`scaler.io.stack_keys`) go to a folder of the session, not the user's home."""
    saved = {name: os.environ.get(name) for name in [*CLOUD_ENVIRONMENT, "AWS_ENDPOINT_URL", "XDG_CONFIG_HOME"]}
    cloud = FakeCloud(log_directory=log_directory).start()
    os.environ.update(CLOUD_ENVIRONMENT, AWS_ENDPOINT_URL=cloud.endpoint_url,
                      XDG_CONFIG_HOME=str(log_directory.parent / "config"))  # fmt: skip
    try:
        yield cloud
    finally:
        cloud.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def cloud_unit_processes(unit_id: str) -> list[psutil.Process]:
    """The live local processes the fake cloud runs for a unit: its shell, its pool and the pool's workers
    (every command line of a unit carries its worker type, `<TYPE>-<unit id>`)."""
    marker = f'-{unit_id}"'
    found: dict[int, psutil.Process] = {}
    for process in psutil.process_iter():
        try:
            if any(marker in part for part in process.cmdline()):
                for member in [process, *_children(process)]:
                    found.setdefault(member.pid, member)
        except psutil.Error:
            continue
    return [process for process in found.values() if _alive(process)]


def ecs_config(spec: LaunchSpec, **overrides: Any) -> ECSWorkerManagerConfig:
    values: dict[str, Any] = dict(
        scheduler_address=spec.worker.scheduler_address, worker_manager_id=spec.manager_id, aws_region=REGION,
        ecs_subnets="default", ecs_task_cpu=1, ecs_task_memory=2,
    )  # fmt: skip
    values.update(overrides)
    return ECSWorkerManagerConfig(**values)


def ec2_config(spec: LaunchSpec, **overrides: Any) -> EC2WorkerManagerConfig:
    values: dict[str, Any] = dict(
        scheduler_address=spec.worker.scheduler_address, worker_manager_id=spec.manager_id, aws_region=REGION,
        instance_type="t2.micro",
    )  # fmt: skip
    values.update(overrides)
    return EC2WorkerManagerConfig(**values)


def ecs_backend(spec: LaunchSpec, _state_directory: Path) -> EcsBackend:
    return EcsBackend(ecs_config(spec), spec.manager_id, AwsClients(REGION))


def ec2_backend(spec: LaunchSpec, _state_directory: Path) -> Ec2Backend:
    backend = Ec2Backend(ec2_config(spec), spec.manager_id, AwsClients(REGION))
    backend.prepare_now()
    return backend


def ec2_spot_backend(spec: LaunchSpec, _state_directory: Path) -> Ec2Backend:
    backend = Ec2Backend(ec2_config(spec, market_type="spot"), spec.manager_id, AwsClients(REGION))
    backend.prepare_now()
    return backend


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return list(process.children(recursive=True))
    except psutil.Error:
        return []


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
