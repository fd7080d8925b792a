"""The fake cloud for tests: one moto server per test session in this process, reset around each test, and
backends of the cloud managers pointed at it.

The session fixture exports `AWS_ENDPOINT_URL` and test credentials, so boto3 in this process and in every
command a test starts (a manager, `scaler FILE`) talks to the fake cloud, as a user's shell would after
`scaler_fake_cloud`.

The fake cloud's units start from nothing (docs/worker_managers.md, 7.1): they have scaler only if their boot
installs it. The ECS and EC2 managers ship the build they run themselves (a wheel of this working tree through
their bucket: docs/guide/bursting.md), with their defaults: the worker image of the account's ECR, the client's
(this interpreter's) Python. The session only sets what a user with a large environment would
(`SESSION_VARIABLES`). Batch jobs run an image with this build baked in (built once per change of the sources,
cached under the fake cloud's cache folder).
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
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil

from scaler.config.sections import EC2WorkerManagerConfig, ECSWorkerManagerConfig
from scaler.worker_manager.aws.client import AwsClients
from scaler.worker_manager.aws_raw_ecs.backend import EcsBackend
from scaler.worker_manager.backend import LaunchSpec
from scaler.worker_manager.orb_aws_ec2.backend import Ec2Backend
from scaler_rehearsal.fake_cloud.cloud import FakeCloud, default_cache_directory
from scaler_rehearsal.fake_cloud.images import Image
from tests.integration.conftest import wait_for

T = TypeVar("T")

REGION = "us-east-1"
CLOUD_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


REPOSITORY = Path(__file__).resolve().parents[2]
#: The units' Python: the client's (this interpreter's) major.minor.
UNIT_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
#: The worker image by a short name (any registry and tag is the same image to the fake cloud).
WORKER_IMAGE = "scaler-worker:test"
#: What the session sets for every cloud manager a test starts, as a user whose environment is large would:
#: `environment = "requirements"` (this build and the explicit requirements only). `environment = "sync"`, the
#: default, ships every distribution of the environment the manager runs in, which is this test environment's
#: hundred-odd packages here; the tests of sync run managers from a small laptop environment of their own.
SESSION_VARIABLES = {
    "SCALER_AWS_RAW_ECS_ENVIRONMENT": "requirements",
    "SCALER_ORB_AWS_EC2_ENVIRONMENT": "requirements",
}
#: How often a test looks at the cloud's resources while it waits for them to change. Each look is API calls that the
#: fake cloud answers in this process (milliseconds of CPU each, the test's side and moto's): looked at every 0.05 s
#: (`wait_for`'s default), a wait kept most of a core busy for its length.
CLOUD_POLL_SECONDS = 0.5


def cloud_client(service: str) -> Any:
    """A boto3 client of `service` at the endpoint the environment names now (the session's fake cloud, or a module's
    own), with its keys, made once per endpoint and keys: making a client reads the service's model, more CPU than
    the call it makes."""
    return _client(service, os.environ.get("AWS_ENDPOINT_URL", ""), os.environ.get("AWS_ACCESS_KEY_ID", ""),
                   os.environ.get("AWS_SECRET_ACCESS_KEY", ""))  # fmt: skip


@functools.cache
def _client(service: str, endpoint_url: str, key_id: str, secret: str) -> Any:
    import boto3

    return boto3.client(service, region_name=REGION, endpoint_url=endpoint_url or None,
                        aws_access_key_id=key_id or None, aws_secret_access_key=secret or None)  # fmt: skip


def wait_for_cloud(predicate: Callable[[], T], what: str, timeout_seconds: float) -> T:
    """`wait_for` a state of the cloud's resources (a predicate that calls its API), looked at every
    CLOUD_POLL_SECONDS."""
    return wait_for(predicate, what, timeout_seconds, CLOUD_POLL_SECONDS)


@functools.cache
def this_build() -> Path:
    """A wheel of this working tree's scaler, built once per change of its sources (a file lock makes parallel
    test processes wait for one build): the Batch jobs' image has it baked in."""
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
        _remove_old_builds(folder)
        return sorted(folder.glob("*.whl"))[0]


def _remove_old_builds(new: Path) -> None:
    """Builds of other sources made more than a day ago (one per change of the tree: they pile up otherwise)."""
    oldest = time.time() - 24 * 3600
    for folder in new.parent.iterdir():
        if folder != new and folder.is_dir() and folder.stat().st_mtime < oldest:
            shutil.rmtree(folder, ignore_errors=True)


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
    return Image("scaler-batch-job", UNIT_PYTHON, f"scaler-compute[aws] @ {wheel.as_uri()}")


def started_fake_cloud(log_directory: Path, **options: Any) -> Iterator[FakeCloud]:
    """A running fake cloud with the environment pointing at it; everything restored afterwards. The stacks'
    own keys and connection files (`scaler.security.connection_files`) go to the session's XDG_CONFIG_HOME
    (tests/conftest.py), where the servers started before the cloud registered theirs too."""
    names = [*CLOUD_ENVIRONMENT, "AWS_ENDPOINT_URL", *SESSION_VARIABLES]
    saved = {name: os.environ.get(name) for name in names}
    cloud = FakeCloud(log_directory=log_directory, images=[batch_image(this_build())], **options).start()
    os.environ.update(CLOUD_ENVIRONMENT, AWS_ENDPOINT_URL=cloud.endpoint_url, **SESSION_VARIABLES)
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
        ecs_subnets="default", ecs_task_cpu=1, ecs_task_memory=2, environment="requirements",
    )  # fmt: skip
    values.update(overrides)
    return ECSWorkerManagerConfig(**values)


def ec2_config(spec: LaunchSpec, **overrides: Any) -> EC2WorkerManagerConfig:
    values: dict[str, Any] = dict(
        scheduler_address=spec.worker.scheduler_address, worker_manager_id=spec.manager_id, aws_region=REGION,
        instance_type="t2.micro", environment="requirements",
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
