"""Spot capacity taken back (#17 item 4): the fake cloud injects a Fargate Spot interruption through its HTTP
route, as AWS causes one (the notice on the task, SIGTERM to its container); the ECS manager (on FARGATE_SPOT)
sees the notice, replaces the task at once and tells the scheduler, which drains the unit's workers if they have
not left already; every task finishes, and none of it spends a retry."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import boto3
import pytest

from scaler import Client
from scaler.fake_cloud.faults import ROUTE
from scaler.worker_manager.backend import unit_id_of_worker
from tests.integration.conftest import Launcher, monitor, wait_for
from tests.integration.manager_harness import workers_of
from tests.integration.test_cloud_burst import ecs_tasks, live_units, slow_identity, start_ecs_manager, units_ever

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(180)]


def inject(endpoint: str, resource: str | None) -> tuple[int, str]:
    query = "" if resource is None else "?" + urllib.parse.urlencode({"resource": resource})
    request = urllib.request.Request(f"{endpoint}{ROUTE}{query}", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_fault_route_names_what_it_did_and_what_it_could_not_find(fake_cloud: Any) -> None:
    assert inject(fake_cloud.endpoint_url, None)[0] == 400
    status, text = inject(fake_cloud.endpoint_url, "arn:aws:ecs:us-east-1:123456789012:task/c/nothing")
    assert status == 404 and "no running ECS task or Batch job 'arn:aws:ecs:" in text
    status, text = inject(fake_cloud.endpoint_url, "i-0123456789abcdef0")
    assert status == 501 and "EC2 spot interruptions are not injected yet" in text


def test_a_spot_interruption_is_replaced_at_once_and_its_tasks_finish_without_spending_a_retry(
    fake_cloud: Any, launcher: Launcher
) -> None:
    # no retry at all: a task lost with its worker would fail, so every result below ran without spending one
    addresses, _scheduler, _storage = launcher.stack(
        workers=0,
        scheduler_args=("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60", "-mtr", "0"),
    )
    manager_id = "ecs-spot"
    manager = start_ecs_manager(launcher, addresses, manager_id, "-mtc", "2", "--ecs-capacity-provider", "FARGATE_SPOT")
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        futures = [client.submit(slow_identity, x) for x in range(16)]
        wait_for(lambda: live_units("ecs", manager_id) == 2, "2 ECS tasks", 60)
        assert all(task.get("capacityProviderName") == "FARGATE_SPOT" for task in ecs_tasks(manager_id))
        with monitor(addresses.monitor) as next_snapshot:
            snapshot = next_snapshot(lambda snapshot: len(workers_of(snapshot, manager_id)) == 2, 60)
        victim = unit_id_of_worker(workers_of(snapshot, manager_id)[0].worker_id.decode())
        ecs = boto3.client("ecs", region_name="us-east-1")
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
