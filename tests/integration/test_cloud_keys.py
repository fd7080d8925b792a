"""Cloud managers give the workers they start the manager's CURVE keys (#11 item 6, #28 item 3): through the
unit's one-time manifest in the manager's bucket, which the unit reads through a presigned URL and deletes at
once. No launch request (an ECS task's overrides, its task definition, an EC2 instance's user data), command
line or log line holds a key.

Checked by switching it off: with the keys put in the container overrides instead of the manifest, the overrides
assertion fails; without the unit's delete, the manifest assertion fails."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from scaler import Client
from scaler.security.key_files import make_key_pair
from tests.integration.cloud_harness import REGION
from tests.integration.conftest import Launcher, ProcessWatch, free_addresses
from tests.integration.test_cloud_burst import ECS_FLAGS, ec2_instances
from tests.integration.test_cloud_faults import EC2_FLAGS

#: The managers' default bucket on the fake cloud (moto's account, the region).
BUCKET = f"scaler-123456789012-{REGION}"

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(180)]


def keyed_stack(launcher: Launcher, folder: Path) -> tuple[Any, dict[str, str]]:
    for name in ("server", "pool", "alice"):
        make_key_pair(str(folder), name)
    authorized = folder / "authorized"
    (authorized / "managers").mkdir(parents=True)
    (authorized / "managers" / "pool.key").write_bytes((folder / "pool.key").read_bytes())
    (authorized / "alice.key").write_bytes((folder / "alice.key").read_bytes())
    server = ("--curve-secret-key", str(folder / "server.key_secret"), "--curve-authorized-keys", str(authorized))
    addresses = free_addresses()
    launcher.start("scaler_object_storage_server", addresses.object_storage, *server)
    scheduler = launcher.start("scaler_scheduler", addresses.scheduler, "-osa", addresses.object_storage, *server,
                               "--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")  # fmt: skip
    scheduler.wait_for_log("scheduler listening on")
    client_keys = {"curve_secret_key": str(folder / "alice.key_secret"), "curve_server_key": str(folder / "server.key")}
    return addresses, client_keys


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str], Path]]:
    """One secured scheduler and object storage for the module (each test's manager has an id of its own): their
    addresses, the client's keys and the keys' folder."""
    folder = tmp_path_factory.mktemp("keys")
    watch = ProcessWatch()
    try:
        addresses, client_keys = keyed_stack(Launcher(watch, folder), folder)
        yield addresses, client_keys, folder
    finally:
        watch.stop_all()
    leftovers = watch.leftovers()
    assert not leftovers, f"processes left behind: {leftovers}"


def secret_text(folder: Path) -> str:
    return (folder / "pool.key_secret").read_text().split('secret-key = "')[1].split('"')[0]


def double(x: int) -> int:
    return 2 * x


@pytest.mark.parametrize("kind", ["ecs", "ec2"])
def test_a_secured_cloud_unit_gets_its_keys_without_a_key_on_its_command_line(
    fake_cloud: Any, launcher: Launcher, keyed: tuple[Any, dict[str, str], Path], kind: str
) -> None:
    addresses, client_keys, folder = keyed
    manager_keys = ("--curve-secret-key", str(folder / "pool.key_secret"), "--curve-server-key",
                    str(folder / "server.key"))  # fmt: skip
    flags = ECS_FLAGS if kind == "ecs" else EC2_FLAGS
    manager_type = "aws_raw_ecs" if kind == "ecs" else "orb_aws_ec2"
    manager = launcher.start("scaler_worker_manager", manager_type, addresses.scheduler, "-wmi", f"keys-{kind}",
                             "-his", "1", "-ll", "DEBUG", "-mtc", "1", *flags, *manager_keys)  # fmt: skip
    with Client(addresses.scheduler, timeout_seconds=120, **client_keys) as client:
        assert client.submit(double, 21).result(timeout=120) == 42, "a worker in the cloud unit ran it, secured"
    secret = secret_text(folder)
    assert secret not in manager.log_text(), "the manager never logs the secret key"
    for log in fake_cloud.log_directory.rglob("*.log"):
        assert secret not in log.read_text(errors="replace"), f"{log} holds the secret key"
    if kind == "ecs":
        ecs = boto3.client("ecs", region_name=REGION)
        arns = ecs.list_tasks(cluster="scaler-cluster", startedBy="keys-ecs")["taskArns"]
        (task,) = ecs.describe_tasks(cluster="scaler-cluster", tasks=arns)["tasks"]
        overrides = str(task["overrides"])
        assert secret not in overrides and "key_secret" not in overrides, "no key, nor key path, in the overrides"
        definition = ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])["taskDefinition"]
        assert secret not in str(definition) and "secrets" not in definition["containerDefinitions"][0]
    else:
        ec2 = boto3.client("ec2", region_name=REGION)
        (instance,) = ec2_instances("keys-ec2")
        data = ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")
        script = base64.b64decode(data["UserData"]["Value"]).decode()
        assert "scaler.worker_manager.unit.boot" in script and secret not in script, "no key in the user data"
    s3 = boto3.client("s3", region_name=REGION)
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"units/keys-{kind}/")["Contents"]]
    assert any(key.endswith("/report.json") for key in keys), keys
    assert not any(key.endswith("/manifest.json") for key in keys), f"the unit deleted its manifest: {keys}"
