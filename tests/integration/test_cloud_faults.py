"""What goes wrong in a cloud burst, each reported once with what to fix, never hanging the manager and never
launching in a loop: a wrong region, a task size Fargate refuses, a spot price for on-demand instances, bad
credentials, a subnet that does not exist, an instance that never finishes booting, a container that exits at
start, the cloud going away."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from scaler import Client
from scaler.io.address import free_tcp_port_block
from scaler.protocol import messages as m
from tests.integration.cloud_harness import CLOUD_ENVIRONMENT, SESSION_VARIABLES, wait_for_cloud
from tests.integration.conftest import (
    CLOUD_START_SECONDS,
    DEADLINE_SECONDS,
    Addresses,
    Launcher,
    Service,
    monitor,
    running_stack,
)
from tests.integration.manager_harness import manager_of
from tests.integration.test_cloud_burst import ECS_FLAGS, ec2_instances, ecs_tasks, live_units, slow_identity

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(180)]

SCALING = ("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")
EC2_FLAGS = ("--aws-region", "us-east-1", "--instance-type", "t2.micro")


def start_manager(launcher: Launcher, kind: str, scheduler: str, manager_id: str, *args: str, **env: str) -> Service:
    flags = ECS_FLAGS if kind == "aws_raw_ecs" else EC2_FLAGS
    return launcher.start(
        "scaler_worker_manager", kind, scheduler, "-wmi", manager_id, "-his", "1", "-ll", "INFO", *flags, *args,
        env=env or None,
    )  # fmt: skip


@pytest.fixture(scope="module")
def work_scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """One scheduler with the work policy (and its object storage) for the module; each test's managers have ids of
    their own."""
    with running_stack(tmp_path_factory.mktemp("stack"), workers=0, scheduler_args=SCALING) as addresses:
        yield addresses


@pytest.fixture
def queued_work(work_scheduler: Addresses) -> Iterator[Addresses]:
    """The module's scheduler with 4 tasks queued by a connected client (no workers), which takes them with it when
    it leaves after the test."""
    addresses = work_scheduler
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        futures = [client.submit(slow_identity, x) for x in range(4)]
        yield addresses
        for future in futures:
            future.cancel()


def errors_in(service: Service, text: str) -> int:
    return sum(1 for line in service.log_text().splitlines() if text in line and ("[ERROR]" in line or "[WARN" in line))


def stays_registered(addresses: Addresses, *manager_ids: str, seconds: float = 4.0) -> None:
    """The managers go on heartbeating: from the first snapshot that lists them all, the scheduler lists each in every
    snapshot for `seconds` of the scheduler's time."""

    def listed(snapshot: m.StatusSnapshot) -> bool:
        return all(manager_of(snapshot, manager_id) is not None for manager_id in manager_ids)

    with monitor(addresses.monitor) as next_snapshot:
        first = next_snapshot(listed)
        snapshot = first
        while snapshot.time - first.time < seconds:
            snapshot = next_snapshot()
            assert listed(snapshot), f"one of {manager_ids} left the scheduler's list"


@pytest.mark.parametrize("kind", ["aws_raw_ecs", "orb_aws_ec2"])
def test_an_unknown_region_is_refused_at_start_naming_it(launcher: Launcher, kind: str) -> None:
    manager = start_manager(launcher, kind, "tcp://127.0.0.1:1", "m", "--aws-region", "moon-1")
    assert manager.wait_exit() == 2
    assert "unknown AWS region 'moon-1' (--aws-region)" in manager.log_text()


def test_a_task_size_fargate_refuses_is_refused_at_start(launcher: Launcher) -> None:
    manager = start_manager(launcher, "aws_raw_ecs", "tcp://127.0.0.1:1", "m", "--ecs-task-cpu", "2",
                            "--ecs-task-memory", "1")  # fmt: skip
    assert manager.wait_exit() == 2
    assert "--ecs-task-memory 1: a Fargate task of 2 vCPU needs 4 to 16 GB" in manager.log_text()


def test_a_spot_price_for_on_demand_instances_is_refused_at_start(launcher: Launcher) -> None:
    manager = start_manager(launcher, "orb_aws_ec2", "tcp://127.0.0.1:1", "m", "--spot-max-price", "0.05")
    assert manager.wait_exit() == 2
    assert "--spot-max-price 0.05: only spot instances have one (add --market-type spot)" in manager.log_text()


#: The two kinds with bad keys: the manager's id, and the error code its cloud API gives them.
BAD_KEYS = {"aws_raw_ecs": ("bad-keys-ecs", "InvalidClientTokenId"), "orb_aws_ec2": ("bad-keys-ec2", "AuthFailure")}


def test_bad_credentials_are_reported_once_and_the_manager_goes_on(launcher: Launcher, queued_work: Addresses) -> None:
    """An ECS manager and an EC2 manager, both with wrong keys, against one cloud that checks them."""
    port = free_tcp_port_block(1)
    cloud = launcher.start("scaler_fake_cloud", "--port", str(port), "--require-credentials")
    cloud.wait_for_log("AWS_ENDPOINT_URL=", CLOUD_START_SECONDS)
    keys = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "AKIANOTAREALKEY00000",
            "AWS_SECRET_ACCESS_KEY": "wrong"}  # fmt: skip
    managers = {
        kind: start_manager(launcher, kind, queued_work.scheduler, BAD_KEYS[kind][0], **keys) for kind in BAD_KEYS
    }
    for kind, manager in managers.items():
        manager.wait_for_log(BAD_KEYS[kind][1])
        # the runner's first listing may come well after the EC2 manager's start-up lookup (which names the code too)
        # on a loaded machine: from the runner's report on, the manager goes on listing without reporting it again
        manager.wait_for_log("could not list the units")
    stays_registered(queued_work, *(manager_id for manager_id, _code in BAD_KEYS.values()))
    for kind, manager in managers.items():
        assert manager.is_running()
        # once by the runner (the EC2 manager also says at start that it could not look the instance type up)
        assert errors_in(manager, "could not list the units") == 1, manager.log_text()
        assert errors_in(manager, BAD_KEYS[kind][1]) <= 2, manager.log_text()
        assert "credentials are wrong or expired" in manager.log_text()
        assert "launched unit" not in manager.log_text()


def test_a_subnet_that_does_not_exist_is_named_once(
    fake_cloud: Any, launcher: Launcher, queued_work: Addresses
) -> None:
    manager = start_manager(launcher, "aws_raw_ecs", queued_work.scheduler, "no-subnet", "--ecs-subnets",
                            "subnet-0000dead")  # fmt: skip
    manager.wait_for_log("InvalidSubnetID.NotFound")
    stays_registered(queued_work, "no-subnet")
    assert manager.is_running()
    assert errors_in(manager, "InvalidSubnetID.NotFound") == 1, manager.log_text()
    assert "subnet-0000dead" in manager.log_text()
    assert ecs_tasks("no-subnet") == []


def test_an_instance_that_never_finishes_booting_is_replaced_with_back_off(
    fake_cloud: Any, launcher: Launcher, queued_work: Addresses
) -> None:
    fake_cloud.set_boot_seconds(3600)
    manager = start_manager(launcher, "orb_aws_ec2", queued_work.scheduler, "slow-boot", "-mtc", "1",
                            "--boot-timeout-seconds", "2")  # fmt: skip
    manager.wait_for_log("still booting after")
    manager.wait_for_log("(--boot-timeout-seconds 2): terminating it")
    wait_for_cloud(lambda: any(i["State"]["Name"] == "terminated" for i in ec2_instances("slow-boot")),
                   "the stuck instance gone", DEADLINE_SECONDS)  # fmt: skip
    manager.wait_for_log("failure(s) in a row: next launch")
    stays_registered(queued_work, "slow-boot")
    assert manager.is_running()


def test_a_container_that_exits_at_start_backs_off_instead_of_looping(
    fake_cloud: Any, launcher: Launcher, queued_work: Addresses
) -> None:
    manager = start_manager(launcher, "aws_raw_ecs", queued_work.scheduler, "crashing", "-mtc", "1",
                            "--preload", "no_such_module_anywhere:setup")  # fmt: skip
    manager.wait_for_log("before any of its workers registered: counted as a failed launch", 60)
    manager.wait_for_log("Essential container in task exited", 60)
    manager.wait_for_log("failure(s) in a row: next launch", 60)
    stays_registered(queued_work, "crashing")
    stopped = ecs_tasks("crashing", "STOPPED")
    assert stopped and all("exit code" in str(task.get("stoppedReason")) for task in stopped), stopped
    assert manager.is_running()


def test_the_cloud_going_away_is_reported_once_and_the_manager_goes_on(
    launcher: Launcher, queued_work: Addresses
) -> None:
    port = free_tcp_port_block(1)
    cloud = launcher.start("scaler_fake_cloud", "--port", str(port))
    cloud.wait_for_log("AWS_ENDPOINT_URL=", CLOUD_START_SECONDS)
    endpoint = f"http://127.0.0.1:{port}"
    # the cloud's keys and the session's variables given here: this test starts its own cloud, so the `fake_cloud`
    # fixture (which puts them in the environment) may not be running in this test process
    manager = start_manager(launcher, "aws_raw_ecs", queued_work.scheduler, "cloud-gone", "-mtc", "1",
                            **CLOUD_ENVIRONMENT, **SESSION_VARIABLES, AWS_ENDPOINT_URL=endpoint)  # fmt: skip
    manager.wait_for_log("launched unit")
    group_leaders = _launched_groups("cloud-gone")
    try:
        os.kill(cloud.pid, signal.SIGKILL)
        cloud.wait_exit()
        manager.wait_for_log("cannot reach the AWS endpoint", 60)
        stays_registered(queued_work, "cloud-gone")
        assert manager.is_running()
        assert errors_in(manager, "cannot reach the AWS endpoint") == 1, manager.log_text()
        manager.popen.send_signal(signal.SIGTERM)  # it cannot stop its units, says so, and exits
        assert manager.wait_exit(60) == 0
    finally:
        for process in group_leaders + _launched_groups("cloud-gone", endpoint):
            _kill_group(process)


def _launched_groups(manager_id: str, endpoint: str = "") -> list[psutil.Process]:
    """The processes a killed fake cloud leaves behind (they ran in their own sessions): the manager's workers, and
    what still boots (its environment names the cloud's endpoint)."""
    marker = f'"worker_manager_id": "{manager_id}"'
    found = []
    for process in psutil.process_iter():
        try:
            if any(marker in part for part in process.cmdline()) and "worker_type" in " ".join(process.cmdline()):
                found.append(process)
            elif endpoint and "scaler-fake-cloud-units-" in " ".join(process.cmdline()):
                if process.environ().get("AWS_ENDPOINT_URL") == endpoint:  # a unit of that cloud, still booting
                    found.append(process)
        except psutil.Error:
            continue
    return found


def _kill_group(process: psutil.Process) -> None:
    try:
        os.killpg(os.getpgid(process.pid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def test_live_units_helper_counts_only_this_manager(fake_cloud: Any) -> None:
    assert live_units("ecs", "nobody") == 0 and live_units("ec2", "nobody") == 0
