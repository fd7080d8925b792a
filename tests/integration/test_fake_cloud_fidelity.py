"""The fake cloud's units start from nothing, as AWS's do (#28 item 1): the image's or the AMI's Python, only the
packages their boot installs, nothing of the laptop's; an image the cloud cannot pull, a Python the image lacks, a
boot script that fails, each ends as it would in AWS, with AWS's (or the image's) words.

How each test was checked against its mechanism switched off is in its docstring.
"""

from __future__ import annotations

import shlex
import sys
import zipfile
from pathlib import Path
from typing import Any

import boto3
import pytest

from scaler import Client
from scaler_rehearsal.fake_cloud.images import WORKER_IMAGE_PYTHONS
from scaler_rehearsal.fake_cloud.pythons import machine_interpreters
from tests.integration.cloud_harness import REGION, UNIT_PYTHON, WORKER_IMAGE
from tests.integration.conftest import Launcher, wait_for
from tests.integration.test_cloud_burst import ECS_FLAGS
from tests.integration.test_cloud_faults import SCALING

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(180)]

LAPTOP = (sys.prefix, str(Path.cwd()))


#: The task definitions' log configuration: the containers' output in CloudWatch Logs, as ECS's awslogs driver puts it.
AWSLOGS = {"logDriver": "awslogs", "options": {"awslogs-group": "/ecs/fidelity", "awslogs-stream-prefix": "unit"}}


def run_ecs_task(image: str, **variables: str) -> str:
    """A Fargate task of `image` with these container overrides; its ARN."""
    ecs, ec2 = boto3.client("ecs", region_name=REGION), boto3.client("ec2", region_name=REGION)
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"][0]["SubnetId"]
    ecs.create_cluster(clusterName="fidelity")
    family = f"fidelity-{abs(hash(image)) % 10**6}"
    ecs.register_task_definition(
        family=family, requiresCompatibilities=["FARGATE"], networkMode="awsvpc", cpu="1024", memory="2048",
        containerDefinitions=[{"name": "main", "image": image, "essential": True, "memory": 2048,
                               "logConfiguration": AWSLOGS}],
    )  # fmt: skip
    environment = [{"name": name, "value": value} for name, value in variables.items()]
    answer = ecs.run_task(
        cluster="fidelity", taskDefinition=family, launchType="FARGATE",
        overrides={"containerOverrides": [{"name": "main", "environment": environment}]},
        networkConfiguration={"awsvpcConfiguration": {"subnets": [subnet], "securityGroups": []}},
    )  # fmt: skip
    return str(answer["tasks"][0]["taskArn"])


def stopped_task(arn: str) -> dict[str, Any]:
    ecs = boto3.client("ecs", region_name=REGION)

    def describe() -> dict[str, Any]:
        return dict(ecs.describe_tasks(cluster="fidelity", tasks=[arn])["tasks"][0])

    wait_for(lambda: describe()["lastStatus"] == "STOPPED", "the task to stop", 90)
    return describe()


def task_log(cloud: Any, arn: str) -> str:
    return (cloud.log_directory / "ecs" / f"{arn.rsplit('/', 1)[-1]}.log").read_text()


def test_an_image_the_cloud_cannot_pull_stops_the_task_as_ecs_does(fake_cloud: Any) -> None:
    """Checked off: with the image check removed from `ecs_tasks`, the task runs its COMMAND and stops with "Essential
    container in task exited (exit code 0)"."""
    task = stopped_task(run_ecs_task("public.ecr.aws/another/project:latest", COMMAND="true"))
    assert task["stopCode"] == "TaskFailedToStart"
    assert task["stoppedReason"].startswith("CannotPullContainerError: "), task["stoppedReason"]
    assert "public.ecr.aws/another/project:latest: not found" in task["stoppedReason"]
    assert task["containers"][0]["reason"] == task["stoppedReason"]


def test_a_python_version_the_image_lacks_stops_the_task_with_the_images_words(fake_cloud: Any) -> None:
    """The words are in the unit's log and in CloudWatch Logs (the task definition's awslogs stream).
    Checked off: a unit that runs the laptop's interpreter (the old runner) runs COMMAND with 3.11 and exits 0."""
    arn = run_ecs_task(WORKER_IMAGE, PYTHON_VERSION="3.7.16", COMMAND="true")
    task = stopped_task(arn)
    assert task["stoppedReason"] == "Essential container in task exited (exit code 1)"
    assert "scaler-worker-image: no Python 3.7 in this image (it has: " in task_log(fake_cloud, arn)
    assert "set PYTHON_VERSION to one of them" in task_log(fake_cloud, arn)
    logs = boto3.client("logs", region_name=REGION)
    stream = f"unit/main/{arn.rsplit('/', 1)[-1]}"
    events = logs.get_log_events(logGroupName="/ecs/fidelity", logStreamName=stream)["events"]
    assert any("no Python 3.7 in this image" in event["message"] for event in events), events


def test_a_requirement_the_index_lacks_stops_the_task_naming_it(fake_cloud: Any) -> None:
    """Checked off: without PYTHON_REQUIREMENTS installed (the entrypoint's install skipped), the task exits 0."""
    missing = "no-such-distribution-scaler-fidelity"
    arn = run_ecs_task(WORKER_IMAGE, PYTHON_VERSION=UNIT_PYTHON, PYTHON_REQUIREMENTS=missing, COMMAND="true")
    assert stopped_task(arn)["stoppedReason"] == "Essential container in task exited (exit code 1)"
    log = task_log(fake_cloud, arn)
    assert f"{missing} was not found in the package registry" in log, log
    assert "scaler-worker-image: installing PYTHON_REQUIREMENTS failed" in log


#: What a container's command says of its environment: where it is, and whether boto3 came with its bytecode (-B:
#: this look writes none).
WHICH_ENVIRONMENT = (
    "import importlib.util, pathlib, sys, boto3; print('prefix:', sys.prefix); "
    "print('boto3 bytecode:', pathlib.Path(importlib.util.cache_from_source(boto3.__file__)).exists())"
)


def tiny_wheel(folder: Path) -> Path:
    """A wheel of one module (`tiny`), a requirement no index is needed for."""
    wheel = folder / "tiny-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tiny/__init__.py", "VALUE = 1\n")
        archive.writestr("tiny-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n")
        archive.writestr("tiny-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr("tiny-1.0.dist-info/RECORD", "")
    return wheel


def test_a_container_of_the_images_python_runs_in_the_images_environment(fake_cloud: Any, tmp_path: Path) -> None:
    """The Batch jobs' image (its Python: the clients'; this build with boto3 baked in): a container that adds
    nothing runs in the image's environment as it is, made once with its bytecode compiled; one that adds a
    requirement, or asks for another Python, makes an environment of its own, and the image's stays as it was.
    Checked off: with the fake cloud making no image environment (no SCALER_IMAGE_VENV), the first container made a
    fresh environment in its own folder and its boto3 had no bytecode."""
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/scaler-batch-job:latest"
    command = f"exec python3 -B -c {shlex.quote(WHICH_ENVIRONMENT)}"
    as_is = run_ecs_task(image, PYTHON_VERSION=UNIT_PYTHON, COMMAND=command)
    tiny = f"tiny @ {tiny_wheel(tmp_path).as_uri()}"
    added = run_ecs_task(image, PYTHON_VERSION=UNIT_PYTHON, PYTHON_REQUIREMENTS=tiny,
                         COMMAND=f"python3 -c 'import tiny' && {command}")  # fmt: skip
    # the worker image's environment is its default Python's (the last it offers): another one makes its own
    other = next(minor for minor in WORKER_IMAGE_PYTHONS[:-1] if minor in machine_interpreters())
    another = run_ecs_task(
        WORKER_IMAGE, PYTHON_VERSION=other, COMMAND="exec python3 -c 'import sys; print(sys.prefix)'"
    )
    nothing = run_ecs_task(image, PYTHON_VERSION=UNIT_PYTHON)  # no COMMAND: fails as a fresh environment's does
    ready = fake_cloud.image_environment("scaler-batch-job")
    assert ready is not None
    units = fake_cloud.state_directory / "units"
    for arn in (as_is, added, another):
        stopped = stopped_task(arn)["stoppedReason"]
        assert stopped == "Essential container in task exited (exit code 0)", task_log(fake_cloud, arn)
    log = task_log(fake_cloud, as_is)
    assert f"scaler-worker-image: using the image's environment with Python {UNIT_PYTHON} ({ready})" in log, log
    assert f"prefix: {ready}\n" in log and "boto3 bytecode: True" in log, log
    log = task_log(fake_cloud, added)
    assert "scaler-worker-image: installing scaler-compute[aws] @ " in log and " tiny @ " in log, log
    assert f"prefix: {units}/" in log, log
    assert not list(ready.glob("lib/python*/site-packages/tiny")), "the image's environment is never written"
    assert task_log(fake_cloud, another).startswith(f"{units}/"), task_log(fake_cloud, another)
    assert stopped_task(nothing)["stoppedReason"] == "Essential container in task exited (exit code 1)"
    log = task_log(fake_cloud, nothing)
    assert "using the image's environment" in log and "COMMAND is not set and the container has no command" in log


def test_an_images_environment_is_made_once_per_machine_and_again_for_another_python_or_requirement(
    tmp_path: Path,
) -> None:
    """A second cloud of this machine finds the image's environment the first made (as a host keeps the images it
    pulled) and makes none; an image of another Python, or other baked requirements, gets another. Checked off: with
    no cache folder (each cloud its own environments), the second cloud made the environment again, in its folder."""
    from scaler_rehearsal.fake_cloud.image_environments import ImageEnvironments
    from scaler_rehearsal.fake_cloud.images import Image

    uv, interpreters = Path(sys.executable).parent / "uv", machine_interpreters()
    cache = tmp_path / "cache"
    first, second = (ImageEnvironments(tmp_path / name, interpreters, uv, cache) for name in ("first", "second"))
    image = Image("scaler-worker", UNIT_PYTHON)
    made = first.of(image, {"PATH": "/usr/bin:/bin"})
    assert made is not None and made.is_relative_to(cache)
    marker = made / "made-by-the-first"
    marker.touch()
    assert second.of(image, {}) == made and marker.exists(), "the second cloud found it, made nothing"
    assert second.made("scaler-worker") == made
    others = [Image("scaler-worker", UNIT_PYTHON, "# baked: nothing")]
    others += [
        Image("scaler-worker", minor)
        for minor in WORKER_IMAGE_PYTHONS
        if minor in interpreters and minor != UNIT_PYTHON
    ][:1]
    for other in others:
        assert second.of(other, {"PATH": "/usr/bin:/bin"}) not in (None, made)


def where_am_i() -> tuple[str, str, str | None, str | None]:
    import os
    import sys

    return sys.prefix, os.getcwd(), os.environ.get("VIRTUAL_ENV"), os.environ.get("PYTHONPATH")


def uses_a_package_of_the_laptop() -> str:
    import moto  # in the laptop's environment (the tests'), not in the unit's

    return str(moto.__version__)


def test_a_unit_sees_nothing_of_the_laptops_environment(fake_cloud: Any, launcher: Launcher) -> None:
    """A task runs in the unit's own environment and folder; one that imports a package only the laptop has fails.
    The only PYTHONPATH a task sees is the one the unit's boot program set (the folder it installed the shipped
    requirements into, inside the unit), never the laptop's. Checked off: with the old runner (units ran this
    interpreter, in this environment and folder), the task ran in the laptop's prefix and the import succeeded."""
    addresses, _scheduler, _storage = launcher.stack(workers=0, scheduler_args=SCALING)
    launcher.start("scaler_worker_manager", "aws_raw_ecs", addresses.scheduler, "-wmi", "fidelity", "-his", "1",
                   "-mtc", "1", *ECS_FLAGS)  # fmt: skip
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        prefix, cwd, virtual_env, python_path = client.submit(where_am_i).result(timeout=120)
        with pytest.raises(ModuleNotFoundError, match="moto"):
            client.submit(uses_a_package_of_the_laptop).result(timeout=60)
    assert prefix not in LAPTOP and cwd not in LAPTOP, (prefix, cwd)
    assert prefix.startswith(str(fake_cloud.state_directory)) and cwd.startswith(str(fake_cloud.state_directory))
    assert virtual_env == prefix
    assert python_path is None or python_path.startswith(str(fake_cloud.state_directory)), python_path
    # the unit's installer cached what it installed in the cloud's own folder, which goes with the cloud (kept in
    # ~/.cache, where the wheels were keyed by this cloud's port, it grew by every cloud's unpacked wheels)
    assert list((fake_cloud.state_directory / "installer-cache" / "uv").glob("wheels-v*/*/*"))


#: Where the instance's pip is, and how many of its modules have no bytecode (without importing them).
PIP_AS_INSTALLED = """
import importlib.util, pathlib
spec = importlib.util.find_spec("pip")
root = pathlib.Path(spec.origin).parent
print("pip of this instance:", root)
print("pip modules without bytecode:", sum(not pathlib.Path(importlib.util.cache_from_source(str(module))).exists()
                                           for module in root.rglob("*.py")))
"""


def test_user_data_runs_on_python_3_9_and_dnf_installs_another(fake_cloud: Any) -> None:
    """Checked off: with the old runner, `python3` was the laptop's 3.11 and `dnf` the machine's (none here). Stock
    AL2023 (the cloud's default; the session's cloud boots an AMI with uv otherwise) has no uv. Its python3.X-pip
    comes with pip's bytecode, as an RPM does (the shim's compiled pip, linked in; checked off: uv's install of pip,
    every module without bytecode until pip first runs)."""
    fake_cloud.set_ami_has_uv(False)
    script = "\n".join([
        "#!/bin/sh", "python3 --version", "python3 -m pip --version || echo 'no pip yet'",
        "command -v uv || echo 'no uv'",
        "dnf install -y python3.10 || echo \"dnf refused: $?\"",
        f"dnf install -y python{UNIT_PYTHON} python{UNIT_PYTHON}-pip",
        # pip's bytecode, as the RPM ships it, before pip first runs (-B: this look writes none)
        f"python{UNIT_PYTHON} -B -c {shlex.quote(PIP_AS_INSTALLED)}",
        f"python{UNIT_PYTHON} -m pip --version", "echo user-data-done",
    ])  # fmt: skip
    log = boot_instance(fake_cloud, script)
    assert f"pip of this instance: {fake_cloud.state_directory}" in log, log
    assert "pip modules without bytecode: 0\n" in log, log
    assert "Python 3.9." in log
    assert "No module named pip" in log and "no pip yet" in log
    assert "No match for argument: python3.10" in log and "dnf refused: 1" in log  # AL2023 offers no 3.10
    assert f"(python {UNIT_PYTHON})" in log, log
    assert "no uv" in log, log


def test_a_units_pip_installs_without_compiling(fake_cloud: Any, tmp_path: Path) -> None:
    """The units' pip installs without byte-compiling what it installs (seconds of a boot that installs with pip);
    checked off: spelled PIP_NO_COMPILE=1, which pip reads as "compile", the installed module had its bytecode."""
    wheel = tmp_path / "tiny-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tiny/__init__.py", "VALUE = 1\n")
        archive.writestr("tiny-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n")
        archive.writestr("tiny-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr("tiny-1.0.dist-info/RECORD", "")
    fake_cloud.set_ami_has_uv(False)
    script = "\n".join([
        "#!/bin/sh", f"dnf install -y python{UNIT_PYTHON} python{UNIT_PYTHON}-pip",
        f'python{UNIT_PYTHON} -m pip install --quiet --no-index --no-deps --target "$TMPDIR/installed" {wheel}',
        'echo "installed: $(ls "$TMPDIR/installed/tiny")"',
        'echo "bytecode files: $(find "$TMPDIR/installed" -name "*.pyc" | wc -l)"',
    ])  # fmt: skip
    log = boot_instance(fake_cloud, script)
    assert "installed: __init__.py" in log, log
    assert "bytecode files: 0\n" in log, log


def test_an_ami_baked_with_uv_has_it_on_the_path(fake_cloud: Any) -> None:
    """The session's AMI (`set_ami_has_uv`): uv on the PATH, the cloud's own; checked off: without the setting,
    `no uv`."""
    log = boot_instance(fake_cloud, "#!/bin/sh\nuv --version || echo 'no uv'\n")
    assert "no uv" not in log and "uv " in log, log


def boot_instance(cloud: Any, script: str, **launch: Any) -> str:
    """Runs an instance with this user data and waits for its end; returns the instance's log."""
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t2.micro",
                                 UserData=script, **launch)["Instances"][0]["InstanceId"]  # fmt: skip
    log = cloud.log_directory / "ec2" / f"{instance}.log"
    wait_for(lambda: log.exists() and "cloud-init:" in log.read_text(), "the user data to end", 120)
    return f"{instance}\n{log.read_text()}"


def instance_of(log: str) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION)
    described = ec2.describe_instances(InstanceIds=[log.split("\n", 1)[0]])
    return dict(described["Reservations"][0]["Instances"][0])


@pytest.mark.parametrize(("behaviour", "ended"), [("terminate", "terminated"), ("stop", "stopped")])
def test_an_instance_outlives_its_user_data_and_ends_by_its_own_shutdown(
    fake_cloud: Any, behaviour: str, ended: str
) -> None:
    """Checked off: with the old runner the instance was terminated when its user data ended, whatever the
    behaviour, and `shutdown` was the machine's own."""
    log = boot_instance(fake_cloud, "#!/bin/sh\necho first\n")
    assert "the instance runs on" in log
    assert instance_of(log)["State"]["Name"] == "running"
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t2.micro",
                                 UserData="#!/bin/sh\nshutdown -h now\nexec sleep 600\n",
                                 InstanceInitiatedShutdownBehavior=behaviour)["Instances"][0]  # fmt: skip

    def state() -> dict[str, Any]:
        return dict(ec2.describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"][0]["Instances"][0])

    wait_for(lambda: state()["State"]["Name"] == ended, f"the instance to be {ended}", 60)
    assert state()["StateReason"]["Code"] == "Client.InstanceInitiatedShutdown"


def test_a_boot_script_that_fails_leaves_an_instance_running(fake_cloud: Any) -> None:
    """User data that fails: cloud-init logs the failure and the instance runs on, with nothing started, as in EC2.
    (A manager's unit in that state is ended by its boot timeout: test_cloud_faults, test_cloud_shipping; a
    requirement no index has is refused before any launch: test_cloud_shipping.) Checked off: with the old runner,
    the instance was terminated when the script failed."""
    log = boot_instance(
        fake_cloud, "#!/bin/sh\necho no-such-distribution-scaler-fidelity cannot be installed\nexit 3\n"
    )
    assert "Failed running /var/lib/cloud/instance/scripts/part-001 [3]" in log, log
    assert instance_of(log)["State"]["Name"] == "running"
