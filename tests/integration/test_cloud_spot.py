"""Spot capacity taken back (#17 item 4): the fake cloud injects a spot interruption through its HTTP route, as
AWS causes one. A Fargate Spot task gets the notice and its container SIGTERM at once; the ECS manager (on
FARGATE_SPOT) sees the notice, replaces the task at once and tells the scheduler, which drains the unit's workers
if they have not left already. An EC2 spot instance gets the two-minute warning in its spot request and runs on
through the notice; the EC2 manager (on --market-type spot) sees the warning, replaces the instance and tells
the scheduler, which drains its workers while they still run, before EC2 terminates the instance. Every task
finishes, and none of it spends a retry."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from scaler import Client
from scaler.worker_manager.backend import unit_id_of_worker
from scaler_rehearsal.fake_cloud.faults import ROUTE
from tests.integration.cloud_harness import cloud_client, cloud_unit_processes, wait_for_cloud
from tests.integration.conftest import COLD_START_SECONDS, Addresses, Launcher, monitor, running_stack, wait_for
from tests.integration.manager_harness import workers_of
from tests.integration.test_cloud_burst import (
    ec2_instances,
    ecs_tasks,
    live_units,
    slow_identity,
    start_ecs_manager,
    units_ever,
)
from tests.integration.test_cloud_faults import start_manager

#: How long an interrupted EC2 spot instance runs on here (AWS: 120 s): long enough for the manager to list the
#: warning first (it lists every second), short enough for the test to see the instance terminated.
EC2_NOTICE_SECONDS = 15.0

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(180)]


def inject(endpoint: str, resource: str | None) -> tuple[int, str]:
    query = "" if resource is None else "?" + urllib.parse.urlencode({"resource": resource})
    request = urllib.request.Request(f"{endpoint}{ROUTE}{query}", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def addresses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """One scheduler with the work policy and no retry at all (a task lost with its worker would fail, so every result
    of a test ran without spending one), and its object storage, for the module's managers."""
    arguments = ("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60", "-mtr", "0")
    with running_stack(tmp_path_factory.mktemp("stack"), workers=0, scheduler_args=arguments) as stack:
        yield stack


def test_the_fault_route_names_what_it_did_and_what_it_could_not_find(fake_cloud: Any) -> None:
    assert inject(fake_cloud.endpoint_url, None)[0] == 400
    status, text = inject(fake_cloud.endpoint_url, "arn:aws:ecs:us-east-1:123456789012:task/c/nothing")
    assert status == 404 and "no running ECS task, EC2 instance or Batch job 'arn:aws:ecs:" in text
    status, text = inject(fake_cloud.endpoint_url, "i-0123456789abcdef0")
    assert status == 404 and "'i-0123456789abcdef0'" in text


def test_only_a_running_ec2_spot_instance_can_be_interrupted_and_only_once(fake_cloud: Any) -> None:
    ec2 = cloud_client("ec2")
    keep_running = "#!/bin/sh\nexec sleep 600\n"
    launch = dict(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t2.micro", UserData=keep_running)
    on_demand = ec2.run_instances(**launch)["Instances"][0]["InstanceId"]
    spot = ec2.run_instances(**launch, InstanceMarketOptions={"MarketType": "spot"})["Instances"][0]["InstanceId"]
    status, text = inject(fake_cloud.endpoint_url, on_demand)
    assert status == 409 and f"EC2 instance {on_demand} is not a spot instance" in text

    (request,) = ec2.describe_spot_instance_requests(Filters=[{"Name": "instance-id", "Values": [spot]}])[
        "SpotInstanceRequests"
    ]
    assert (request["State"], request["Status"]["Code"]) == ("active", "fulfilled")
    status, text = inject(fake_cloud.endpoint_url, spot)
    assert status == 200 and "spot interruption notice" in text
    (warned,) = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[request["SpotInstanceRequestId"]])[
        "SpotInstanceRequests"
    ]
    assert (warned["State"], warned["Status"]["Code"]) == ("closed", "instance-terminated-no-capacity")
    assert warned["Status"]["UpdateTime"] >= request["Status"]["UpdateTime"]
    status, text = inject(fake_cloud.endpoint_url, spot)
    assert status == 409 and "interruption notice already" in text

    ended = ec2.run_instances(**launch, InstanceMarketOptions={"MarketType": "spot"})["Instances"][0]["InstanceId"]
    ec2.terminate_instances(InstanceIds=[ended])
    # the cloud's runner boots the instances launched before it one at a time (each one's dnf and folders): on a
    # loaded machine that took over 30 s once, before it came to this one
    wait_for_cloud(lambda: _instance(ec2, ended)["State"]["Name"] == "terminated", f"{ended} to be terminated",
             COLD_START_SECONDS)  # fmt: skip
    status, text = inject(fake_cloud.endpoint_url, ended)
    assert status == 409 and f"EC2 instance {ended} is terminated" in text, text
    (closed,) = ec2.describe_spot_instance_requests(Filters=[{"Name": "instance-id", "Values": [ended]}])[
        "SpotInstanceRequests"
    ]
    assert (closed["State"], closed["Status"]["Code"]) == ("closed", "instance-terminated-by-user")


def test_a_spot_interruption_is_replaced_at_once_and_its_tasks_finish_without_spending_a_retry(
    fake_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    manager_id = "ecs-spot"
    manager = start_ecs_manager(launcher, addresses, manager_id, "-mtc", "2", "--ecs-capacity-provider", "FARGATE_SPOT")
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        futures = [client.submit(slow_identity, x) for x in range(16)]
        wait_for_cloud(lambda: live_units("ecs", manager_id) == 2, "2 ECS tasks", 60)
        assert all(task.get("capacityProviderName") == "FARGATE_SPOT" for task in ecs_tasks(manager_id))
        with monitor(addresses.monitor) as next_snapshot:
            snapshot = next_snapshot(lambda snapshot: len(workers_of(snapshot, manager_id)) == 2, 60)
        victim = unit_id_of_worker(workers_of(snapshot, manager_id)[0].worker_id.decode())
        ecs = cloud_client("ecs")
        arns = [task["taskArn"] for task in ecs_tasks(manager_id)]
        tagged = ecs.describe_tasks(cluster="scaler-cluster", tasks=arns, include=["TAGS"])["tasks"]
        (task,) = [task for task in tagged if any(tag["value"] == victim for tag in task.get("tags", []))]
        status, text = inject(fake_cloud.endpoint_url, task["taskArn"])
        assert status == 200 and "Fargate Spot interruption" in text

        assert [future.result() for future in futures] == list(range(16)), "every task finished, none failed"
    interrupted = [task for task in ecs_tasks(manager_id, "STOPPED") if task.get("stopCode") == "SpotInterruption"]
    assert interrupted and interrupted[0]["stoppedReason"] == "Your Spot Task was interrupted."
    assert units_ever("ecs", manager_id) >= 3, "the interrupted task was replaced"
    # the manager saw the notice and told the scheduler (whose drain finds the worker gone already when the
    # container's SIGTERM made it leave first; the scheduler's side is tests/simulation/test_spot_drain.py), or,
    # when the container was already gone at its next listing, replaced the unit naming the interruption
    noticed = f"unit {victim} is reclaimed by its provider in"
    ended = f"unit {victim} ended on its own"

    def reported() -> bool:
        log = manager.log_text()
        return noticed in log or (ended in log and "Your Spot Task was interrupted." in log)

    wait_for(reported, f"the manager to report unit {victim}'s interruption")


def test_an_ec2_spot_interruption_is_drained_and_replaced_before_the_instance_goes(
    fake_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    fake_cloud.set_spot_notice_seconds(EC2_NOTICE_SECONDS)
    manager_id = "ec2-spot"
    # t2.micro: one worker per instance, so two instances
    manager = start_manager(launcher, "orb_aws_ec2", addresses.scheduler, manager_id, "-mtc", "2",
                            "--market-type", "spot")  # fmt: skip
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        futures = [client.submit(slow_identity, x) for x in range(16)]
        wait_for_cloud(lambda: live_units("ec2", manager_id) == 2, "2 EC2 instances", 60)
        assert all(instance.get("InstanceLifecycle") == "spot" for instance in ec2_instances(manager_id))
        with monitor(addresses.monitor) as next_snapshot:
            snapshot = next_snapshot(lambda snapshot: len(workers_of(snapshot, manager_id)) == 2, 60)
        victim = unit_id_of_worker(workers_of(snapshot, manager_id)[0].worker_id.decode())
        (instance_id,) = [instance["InstanceId"] for instance in ec2_instances(manager_id)
                          if {"Key": "scaler-unit-id", "Value": victim} in instance.get("Tags", [])]  # fmt: skip
        status, text = inject(fake_cloud.endpoint_url, instance_id)
        assert status == 200 and "spot interruption notice" in text

        assert [future.result() for future in futures] == list(range(16)), "every task finished, none failed"
    manager.wait_for_log(f"unit {victim} is reclaimed by its provider in", 60)
    wait_for_cloud(lambda: units_ever("ec2", manager_id) >= 3, "the interrupted instance to be replaced", 60)

    ec2 = cloud_client("ec2")
    gone = wait_for_cloud(
        lambda: (found := _instance(ec2, instance_id))["State"]["Name"] == "terminated" and found,
        f"EC2 to terminate {instance_id} at the end of its notice",
        EC2_NOTICE_SECONDS + 60,
    )
    assert gone["StateReason"]["Code"] == "Server.SpotInstanceTermination"
    assert gone["StateTransitionReason"].startswith("Service initiated (")
    wait_for(lambda: not cloud_unit_processes(victim), f"the processes of unit {victim} to exit", 30)


def _instance(ec2: Any, instance_id: str) -> dict[str, Any]:
    described: dict[str, Any] = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return described
