"""The fake cloud answers concurrent requests as it would answer each alone (rehearsal/scaler_rehearsal/fake_cloud/
moto_requests.py): a `describe_tasks` without `include` made while one with `include=["TAGS"]` is being answered
leaves that answer its tags.

Without it, a CI run (load 6-10) saw a launcher conclude that its hub had ended (test_cloud_hub.py, "the hub in the
cloud ended" instead of "the cloud's API does not answer"): the test described the hub's task while the launcher's
listing did, the listing's answer came without tags, and the hub, known by its tag, was not in it.

Checked with the mechanism off (`moto_requests.install()` left out of `FakeCloud.start`): the answer has no tags.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from tests.integration.cloud_harness import REGION

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(120)]

CLUSTER = "concurrent-requests"
TAGS = [{"key": "scaler-manager-id", "value": "ecs-hub"}, {"key": "scaler-unit-id", "value": "0123456789abcdef"}]


def tagged_task() -> str:
    """A Fargate task run with TAGS (its image is not in the cloud's catalogue: it stops at once, listed all the same);
    its ARN."""
    ecs, ec2 = boto3.client("ecs", region_name=REGION), boto3.client("ec2", region_name=REGION)
    subnet = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"][0]["SubnetId"]
    ecs.create_cluster(clusterName=CLUSTER)
    ecs.register_task_definition(
        family=CLUSTER, requiresCompatibilities=["FARGATE"], networkMode="awsvpc", cpu="1024", memory="2048",
        containerDefinitions=[{"name": "main", "image": "not-in-the-catalogue", "essential": True, "memory": 2048}],
    )  # fmt: skip
    answer = ecs.run_task(
        cluster=CLUSTER, taskDefinition=CLUSTER, launchType="FARGATE", tags=TAGS,
        networkConfiguration={"awsvpcConfiguration": {"subnets": [subnet], "securityGroups": []}},
    )  # fmt: skip
    return str(answer["tasks"][0]["taskArn"])


@pytest.fixture
def while_answering(fake_cloud: Any) -> Iterator[Callable[[Callable[[], None]], None]]:
    """`while_answering(request)`: `request()` is made, once, while the cloud is answering the next request that
    describes a task, between the moment that answer reads the task's `lastStatus` and the moment it reads its tags
    (an answer's fields are read in the order of the API's model), as a request of another client could come."""
    from moto.ecs.models import Task

    original = Task.last_status
    armed: list[Callable[[], None]] = []

    def last_status(task: Any) -> str:
        if armed and threading.current_thread().name != "fake-cloud-runners":
            armed.pop()()
        return str(original.fget(task))

    Task.last_status = property(last_status, original.fset)
    try:
        yield armed.append
    finally:
        Task.last_status = original


def test_a_describe_without_tags_made_meanwhile_leaves_a_describe_with_tags_its_tags(
    while_answering: Callable[[Callable[[], None]], None],
) -> None:
    arn = tagged_task()
    ecs = boto3.client("ecs", region_name=REGION)
    meanwhile: list[dict[str, Any]] = []
    while_answering(lambda: meanwhile.extend(ecs.describe_tasks(cluster=CLUSTER, tasks=[arn])["tasks"]))
    (task,) = boto3.client("ecs", region_name=REGION).describe_tasks(cluster=CLUSTER, tasks=[arn], include=["TAGS"])[
        "tasks"
    ]
    assert meanwhile and "tags" not in meanwhile[0]  # the request made meanwhile was answered, without tags
    assert task.get("tags") == TAGS
