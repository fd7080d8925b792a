"""The fake cloud for tests: one moto server per test session in this process, reset around each test, and
backends of the cloud managers pointed at it.

The session fixture exports `AWS_ENDPOINT_URL` and test credentials, so boto3 in this process and in every
command a test starts (a manager, `scaler FILE`) talks to the fake cloud, as a user's shell would after
`scaler_fake_cloud`.

The fake cloud's units start from nothing (docs/worker_managers.md, 7.1): they have scaler only if their boot
installs it. Until the managers ship the build they run themselves, the tests do it: a wheel of this working tree
(built once per change of its sources, cached under the fake cloud's cache folder) is put in the fake S3 after
every reset, and the managers are given it through the environment (`SCALER_<MANAGER TYPE>_<SETTING>`, which
every manager and `scaler FILE` started by a test reads): ECS tasks run the worker image with it in
`PYTHON_REQUIREMENTS`, EC2 instances install it with `dnf install python3.X` and pip, Batch jobs run an image
with it baked in. The units' Python is this interpreter's major.minor, as the client's must be.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import psutil

from scaler.config.sections import EC2WorkerManagerConfig, ECSWorkerManagerConfig
from scaler.fake_cloud.cloud import FakeCloud, default_cache_directory
from scaler.fake_cloud.images import Image
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


REPOSITORY = Path(__file__).resolve().parents[2]
#: The units' Python: the client's (this interpreter's) major.minor.
UNIT_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
#: The worker image the tests' ECS managers name (any tag; docs/worker_managers.md).
WORKER_IMAGE = "scaler-worker:test"
#: The bucket the build is shipped in after every reset.
BUILD_BUCKET = "scaler-test-builds"
#: What the tests set for every manager they start (the values of `ship_build`).
BUILD_VARIABLES = (
    "SCALER_AWS_RAW_ECS_ECS_TASK_IMAGE",
    "SCALER_AWS_RAW_ECS_ECS_PYTHON_VERSION",
    "SCALER_AWS_RAW_ECS_ECS_PYTHON_REQUIREMENTS",
    "SCALER_ORB_AWS_EC2_PYTHON_VERSION",
    "SCALER_ORB_AWS_EC2_REQUIREMENTS_TXT",
)


@functools.cache
def this_build() -> Path:
    """A wheel of this working tree's scaler, built once per change of its sources (a file lock makes parallel
    test processes wait for one build)."""
    digest = _source_digest()
    folder = default_cache_directory() / "builds" / digest[:16]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheels = sorted(folder.glob("*.whl"))
        if wheels:
            return wheels[0]
        with tempfile.TemporaryDirectory(prefix="scaler-build-") as source:
            for name in ("pyproject.toml", "README.md", "LICENSE"):
                if (REPOSITORY / name).exists():
                    shutil.copy(REPOSITORY / name, Path(source) / name)
            shutil.copytree(REPOSITORY / "scaler", Path(source) / "scaler",
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
            uv = str(Path(sys.executable).parent / "uv")
            subprocess.run([uv, "build", "--wheel", "--out-dir", str(folder), source], check=True,
                           capture_output=True, timeout=600)  # fmt: skip
        return sorted(folder.glob("*.whl"))[0]


def _source_digest() -> str:
    digest = hashlib.sha256()
    files = [REPOSITORY / "pyproject.toml", *sorted((REPOSITORY / "scaler").rglob("*"))]
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(REPOSITORY)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def batch_image(wheel: Path) -> Image:
    """The Batch jobs' image (docker/batch-job.Dockerfile): this build, with boto3, baked in."""
    return Image("scaler-batch-job", UNIT_PYTHON, f"scaler[aws] @ {wheel.as_uri()}")


def ship_build(wheel: Path) -> dict[str, str]:
    """The wheel in the fake S3 (a bucket of its own, made again after every reset) and what the managers are
    told of it: a presigned URL, as a manager shipping its build would give its units."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUILD_BUCKET)
    s3.upload_file(str(wheel), BUILD_BUCKET, wheel.name)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": BUILD_BUCKET, "Key": wheel.name}, ExpiresIn=86400)
    requirement = f"scaler @ {url}"
    values = (WORKER_IMAGE, UNIT_PYTHON, requirement, UNIT_PYTHON, requirement)
    return dict(zip(BUILD_VARIABLES, values, strict=True))


def started_fake_cloud(log_directory: Path, **options: Any) -> Iterator[FakeCloud]:
    """A running fake cloud with the environment pointing at it; everything restored afterwards."""
    saved = {name: os.environ.get(name) for name in [*CLOUD_ENVIRONMENT, "AWS_ENDPOINT_URL", *BUILD_VARIABLES]}
    wheel = this_build()
    cloud = FakeCloud(log_directory=log_directory, images=[batch_image(wheel)], **options).start()
    os.environ.update(CLOUD_ENVIRONMENT, AWS_ENDPOINT_URL=cloud.endpoint_url)
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
        ecs_subnets="default", ecs_task_cpu=1, ecs_task_memory=2, ecs_task_image=WORKER_IMAGE,
        ecs_python_version=UNIT_PYTHON,
        ecs_python_requirements=os.environ["SCALER_AWS_RAW_ECS_ECS_PYTHON_REQUIREMENTS"],
    )  # fmt: skip
    values.update(overrides)
    return ECSWorkerManagerConfig(**values)


def ec2_config(spec: LaunchSpec, **overrides: Any) -> EC2WorkerManagerConfig:
    values: dict[str, Any] = dict(
        scheduler_address=spec.worker.scheduler_address, worker_manager_id=spec.manager_id, aws_region=REGION,
        instance_type="t2.micro", python_version=UNIT_PYTHON,
        requirements_txt=os.environ["SCALER_ORB_AWS_EC2_REQUIREMENTS_TXT"],
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
