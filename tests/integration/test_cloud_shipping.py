"""#28 item 2, what goes wrong when a cloud manager ships this build and an environment to its units, each a fault:

- refused when the manager starts, before anything is launched, naming it: a package that does not exist, wheels
  the units' Python cannot install, a Python version other than the client's (which no image is asked for);
- a requirement that fails on the unit itself: its workers still start, and a task that imports it fails with an
  ImportError naming the requirement and the installer's reason (at the first such task, never a hang); the
  manager's log names it too;
- the manager's bucket deleted mid-burst: made again, wheels uploaded again, the next unit boots;
- a unit that cannot reach the scheduler: its boot report says so, the manager names it within one boot timeout;
- a unit whose boot fails before scaler runs (this build cannot be installed by the image's entrypoint or the
  instance's boot script): its report names what failed, before the cloud's words (an exit code).
"""

from __future__ import annotations

import asyncio
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest

from scaler import Client
from scaler.config.sections import WorkerConfig
from scaler.worker_manager.aws.client import AwsClients
from scaler.worker_manager.aws_raw_ecs.backend import EcsBackend
from scaler.worker_manager.backend import LaunchSpec, UnitInfo
from scaler.worker_manager.orb_aws_ec2.backend import Ec2Backend
from scaler.worker_manager.ship.distributions import DISTRIBUTION_NAME, this_python
from scaler.worker_manager.ship.environment import UnitEnvironment
from scaler.worker_manager.ship.unit_target import UnitTarget
from tests.integration.cloud_harness import REGION, ec2_config, ecs_config, wait_for_cloud
from tests.integration.conftest import Addresses, Launcher, Service, monitor, running_stack, wait_for
from tests.integration.manager_harness import workers_of
from tests.integration.test_cloud_burst import ECS_FLAGS, ecs_tasks, live_units, slow_identity

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(240)]

SCALING = ("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")
BUCKET = f"scaler-123456789012-{REGION}"
#: Only this build of scaler is shipped (the units here already have the test environment's packages).
LEAN = ("--environment", "requirements")


@pytest.fixture(scope="module")
def addresses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """One scheduler with the work policy (and its object storage) for the module; each test's manager has an id of
    its own, and each test's client takes its unfinished tasks with it."""
    with running_stack(tmp_path_factory.mktemp("stack"), workers=0, scheduler_args=SCALING) as stack:
        yield stack


def start_ecs(launcher: Launcher, scheduler: str, manager_id: str, *args: str) -> Service:
    return launcher.start(
        "scaler_worker_manager", "aws_raw_ecs", scheduler, "-wmi", manager_id, "-his", "1", "-ll", "INFO",
        *ECS_FLAGS, *args,
    )  # fmt: skip


def test_what_the_units_cannot_install_is_refused_at_start_each_named(
    fake_cloud: Any, launcher: Launcher, tmp_path: Path
) -> None:
    """A package that does not exist and wheels the units' Python cannot install, given together: one refusal names
    each (the check reports every problem it finds), and nothing is launched."""
    missing = "no-such-package-scaler-test==1.0"
    wheels = {
        _wheel(tmp_path, "oldtag-1.0-cp39-cp39-manylinux_2_17_x86_64.whl"): "which the units' Python",
        _wheel(tmp_path, "future-1.0-py3-none-any.whl", requires_python=">=3.99"): "requires Python >=3.99",
    }
    requirements = ";".join([missing, *map(str, wheels)])
    manager = start_ecs(launcher, "tcp://127.0.0.1:1", "bad-env", *LEAN, "--ecs-python-requirements", requirements)
    assert manager.wait_exit(120) == 2
    log = manager.log_text()
    assert f"{missing}: the package index has no file of it for Python" in log, log
    for wheel, why in wheels.items():
        assert wheel.name in log and why in log, log
    assert "nothing is launched" in log and ecs_tasks("bad-env") == []


@pytest.mark.parametrize(
    ("kind", "flag"), [("aws_raw_ecs", "--ecs-python-version"), ("orb_aws_ec2", "--python-version")]
)
def test_a_python_version_other_than_the_clients_is_refused_at_start_naming_both(
    fake_cloud: Any, launcher: Launcher, kind: str, flag: str
) -> None:
    extra = ECS_FLAGS if kind == "aws_raw_ecs" else ("--aws-region", REGION)
    manager = launcher.start("scaler_worker_manager", kind, "tcp://127.0.0.1:1", "-wmi", "py", *extra, flag, "3.99")
    assert manager.wait_exit(120) == 2
    assert f"{flag.lstrip('-').replace('-', '_')} 3.99 differs from the client's Python {this_python()}" in (
        manager.log_text()
    ), manager.log_text()


def needs_unshippable() -> None:
    import unshippable  # type: ignore[import-not-found]  # noqa: F401


def test_a_requirement_a_unit_cannot_install_fails_the_tasks_that_need_it_naming_it(
    fake_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    """The index check cannot see a URL requirement: the unit's installer (the image's uv) fails on it. Checked by
    switching it off: without the stubs, the task fails with a bare "No module named 'unshippable'"."""
    broken = "unshippable @ http://127.0.0.1:9/unshippable-1.0-py3-none-any.whl"
    manager = start_ecs(launcher, addresses.scheduler, "stubbed", *LEAN, "-mtc", "1",
                        "--ecs-python-requirements", broken)  # fmt: skip
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        with pytest.raises(ImportError) as raised:
            client.submit(needs_unshippable).result(timeout=180)
    assert "unshippable @ http://127.0.0.1:9/" in str(raised.value) and "could not be installed" in str(raised.value)
    assert "uv:" in str(raised.value), raised.value
    manager.wait_for_log("could not be installed", 60)


def test_the_managers_bucket_deleted_mid_burst_is_made_again_and_the_next_unit_boots(
    fake_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    manager = start_ecs(launcher, addresses.scheduler, "bucketless", *LEAN, "-mtc", "2")
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        first = client.submit(slow_identity, 1)
        wait_for_cloud(lambda: live_units("ecs", "bucketless") == 1, "the first unit", 60)
        wait_for_cloud(_bucket_deleted, "the bucket to be deleted (a unit may write its report meanwhile)", 30)
        futures = [client.submit(slow_identity, x) for x in range(6)]
        with monitor(addresses.monitor) as next_snapshot:
            next_snapshot(lambda snapshot: len(workers_of(snapshot, "bucketless")) == 2, 120)
        assert first.result() == 1 and [future.result() for future in futures] == list(range(6))
    manager.wait_for_log("is gone (deleted while the manager ran): creating it again", 10)
    assert boto3.client("s3", region_name=REGION).head_bucket(Bucket=BUCKET)


def test_a_unit_that_cannot_reach_the_scheduler_is_named_within_one_boot_timeout(
    fake_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    nowhere = "tcp://127.0.0.1:9"  # what the workers are told: nothing listens there
    manager = start_ecs(launcher, addresses.scheduler, "lost", *LEAN, "-mtc", "1", "-wsa", nowhere,
                        "--boot-timeout-seconds", "30")  # fmt: skip
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        future = client.submit(slow_identity, 1)
        manager.wait_for_log(f"cannot reach the scheduler at {nowhere} from this unit", 90)
        manager.wait_for_log("none of its workers registered within 30 s", 60)
        future.cancel()
    assert "cannot reach the scheduler" in manager.log_text()


@pytest.mark.parametrize("kind", ["ecs", "ec2"])
def test_a_unit_whose_boot_fails_before_scaler_runs_is_named_with_what_failed(fake_cloud: Any, kind: str) -> None:
    """This build by a pin of a version no index has (what a wheel installed with --find-links was taken for): the
    image's entrypoint (an instance's boot script) cannot install it, writes the unit's boot report and exits. The
    unit's detail (the manager's log line, the hub's start-up error) names the install and the installer's words
    first, then the cloud's. Checked off: without SCALER_UNIT_REPORT_URL in an ECS launch, without the last read of a
    gone unit's report, or with the report sent as urllib's default form (the fake S3 stored an empty body), the
    detail is only the cloud's ("task ...: Essential container in task exited (exit code 1)")."""
    pin = f"{DISTRIBUTION_NAME}==0.0.0.dev38"
    spec = LaunchSpec(f"boot-fails-{kind}", WorkerConfig(scheduler_address="tcp://127.0.0.1:9"))
    environment = UnitEnvironment("requirements", UnitTarget(this_python()), pin, None, (), ())
    backend: EcsBackend | Ec2Backend
    if kind == "ecs":
        backend = EcsBackend(ecs_config(spec), spec.manager_id, AwsClients(REGION), environment=environment)
    else:
        backend = Ec2Backend(ec2_config(spec), spec.manager_id, AwsClients(REGION), environment=environment)
        backend.prepare_now()
    (unit_id,) = asyncio.run(backend.launch(1, spec))

    def gone() -> UnitInfo | None:
        unit = next(unit for unit in asyncio.run(backend.list_units()) if unit.unit_id == unit_id)
        return None if unit.is_alive else unit

    detail = wait_for(gone, "the unit to end", 180, interval=1.0).detail
    assert detail.startswith(f"failed, could not install {pin} with "), detail
    assert "not found in the package registry" in detail or f"No matching distribution found for {pin}" in detail
    cloud = "Essential container in task exited (exit code 1)" if kind == "ecs" else "instance i-"
    assert cloud in detail.split("; ", 1)[1], detail


def _bucket_deleted() -> bool:
    bucket = boto3.resource("s3", region_name=REGION).Bucket(BUCKET)
    bucket.objects.all().delete()
    try:
        bucket.delete()
    except botocore.exceptions.ClientError:
        return False
    return True


def _wheel(folder: Path, name: str, requires_python: str = "") -> Path:
    path = folder / name
    distribution, version = name.split("-")[:2]
    metadata = f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    if requires_python:
        metadata += f"Requires-Python: {requires_python}\n"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{distribution}.py", "")
        archive.writestr(f"{distribution}-{version}.dist-info/METADATA", metadata)
    return path
