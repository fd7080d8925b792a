"""The project's worker image for real: `scaler_fake_cloud --container-engine docker` runs an ECS manager's tasks
as containers of `scaler-worker:test` (docker/worker.Dockerfile, built by `sh docker/test-engine.sh start`, which
`make test` runs as root), and a client's map runs on them. Skips, saying why, where no engine or image is there.

Checked off: without `--container-engine docker` the tasks run as local units, no container carries the cloud's
label, and the test fails at "the tasks ran as containers".
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import boto3
import pytest

from scaler import Client
from scaler.io.address import free_tcp_port_block
from tests.integration.cloud_harness import SESSION_VARIABLES, UNIT_PYTHON, this_build
from tests.integration.conftest import CLOUD_START_SECONDS, CLOUD_STOP_SECONDS, Launcher, wait_for
from tests.integration.test_cloud_burst import ECS_FLAGS
from tests.integration.test_cloud_faults import SCALING

IMAGE = "scaler-worker:test"


def why_not_docker() -> str | None:
    """Why this machine cannot run the test, or None."""
    if shutil.which("docker") is None:
        return "no docker command (sh docker/test-engine.sh start installs Debian's docker.io, as root)"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        return "no docker daemon answers (sh docker/test-engine.sh start starts one, as root)"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=30).returncode != 0:
        return f"no {IMAGE} image (sh docker/test-engine.sh start builds it)"
    probe = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", IMAGE]
    found = subprocess.run([*probe, "-c", f"command -v python{UNIT_PYTHON}"], capture_output=True, timeout=60)
    if found.returncode != 0:
        return f"{IMAGE} has no Python {UNIT_PYTHON}, the client's (it is built from Debian 12's python3)"
    return None


pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(300)]


@pytest.fixture
def docker_engine() -> None:
    reason = why_not_docker()
    if reason is not None:
        pytest.skip(reason)


def containers_of(pid: int) -> list[str]:
    listed = subprocess.run(["docker", "ps", "-q", "--filter", f"label=scaler-fake-cloud={pid}"], capture_output=True,
                            text=True, timeout=30)  # fmt: skip
    return listed.stdout.split()


def square(x: int) -> int:
    return x * x


def test_ecs_tasks_run_as_containers_of_the_worker_image(
    docker_engine: None, launcher: Launcher, tmp_path: Path
) -> None:
    port = free_tcp_port_block(1)
    cloud = launcher.start("scaler_fake_cloud", "--port", str(port), "--container-engine", "docker", "--log-dir",
                           str(tmp_path / "cloud"))  # fmt: skip
    cloud.wait_for_log("AWS_ENDPOINT_URL=", CLOUD_START_SECONDS)
    endpoint = f"http://127.0.0.1:{port}"
    # the session's `environment = "requirements"`: this build and its requirements, not the test environment's
    # hundred-odd distributions (environment = sync), which each container installed for a minute and a half
    credentials = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1", **SESSION_VARIABLES}  # fmt: skip
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing")  # fmt: skip
    wheel = this_build()
    s3.create_bucket(Bucket="builds")
    s3.upload_file(str(wheel), "builds", wheel.name)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "builds", "Key": wheel.name}, ExpiresIn=3600)

    addresses, _scheduler, _storage = launcher.stack(workers=0, scheduler_args=SCALING)
    manager = launcher.start(
        "scaler_worker_manager", "aws_raw_ecs", addresses.scheduler, "-wmi", "docker-e2e", "-his", "1", "-mtc", "2",
        *ECS_FLAGS, "--ecs-task-image", IMAGE, "--ecs-python-version", UNIT_PYTHON,
        "--ecs-python-requirements", f"scaler-compute @ {url}", env=credentials,
    )  # fmt: skip
    try:
        with Client(address=addresses.scheduler, timeout_seconds=180) as client:
            results = client.map(square, range(20))
            assert containers_of(cloud.pid), "the tasks ran as containers"
        assert results == [x * x for x in range(20)]
        manager.popen.send_signal(signal.SIGTERM)
        assert manager.wait_exit(60) == 0
        wait_for(lambda: not containers_of(cloud.pid), "the stopped tasks' containers to be gone", 60)
    finally:
        cloud.popen.send_signal(signal.SIGTERM)
        cloud.wait_exit(CLOUD_STOP_SECONDS)
    assert containers_of(cloud.pid) == []
