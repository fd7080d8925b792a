"""ECS `run_task` can answer 200 with no task and a `failures` list (capacity, a bad image, a missing
platform): the backend raises a CloudError naming every reason, and the runner reports it once and backs off.
Real boto3 clients, their answers given by botocore's Stubber (moto never returns such failures)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("botocore", reason="boto3 comes with the aws extra (make test installs it)")
from botocore.stub import ANY, Stubber

from scaler.config.sections import ECSWorkerManagerConfig, WorkerConfig
from scaler.worker_manager.aws.client import AwsClients, CloudError
from scaler.worker_manager.aws_raw_ecs.backend import EcsBackend
from scaler.worker_manager.backend import LaunchSpec

ARN = "arn:aws:ecs:us-east-1:123456789012:task-definition/scaler-task-definition:1"


def prepared(clients: AwsClients) -> tuple[Stubber, Stubber, Stubber]:
    ecs, ec2, s3 = Stubber(clients["ecs"]), Stubber(clients["ec2"]), Stubber(clients["s3"])
    ecs.add_response("describe_clusters", {"clusters": [{"clusterName": "scaler-cluster", "status": "ACTIVE"}]})
    ec2.add_response("describe_subnets", {"Subnets": [{"SubnetId": "subnet-1", "VpcId": "vpc-1"}]})
    s3.add_response("head_bucket", {})  # the manager's bucket exists
    definition = {"taskDefinitionArn": ARN, "cpu": "1024", "memory": "2048", "containerDefinitions": [
        {"name": "scaler-container", "image": "worker-image"}]}  # fmt: skip
    ecs.add_response("describe_task_definition", {"taskDefinition": definition})
    s3.add_response("put_object", {})  # the unit's manifest
    return ecs, ec2, s3


def launch(clients: AwsClients, run_task_answer: dict[str, Any]) -> list[str]:
    config = ECSWorkerManagerConfig(
        scheduler_address="tcp://127.0.0.1:2345", worker_manager_id="ecs", ecs_subnets="subnet-1",
        ecs_security_groups="sg-1", ecs_task_cpu=1, ecs_task_memory=2, ecs_task_image="worker-image",
        environment="image", s3_bucket="bucket",
    )  # fmt: skip
    spec = LaunchSpec("ecs", WorkerConfig(scheduler_address="tcp://127.0.0.1:2345", worker_type="ECS"))
    ecs, ec2, s3 = prepared(clients)
    expected = {"cluster": "scaler-cluster", "taskDefinition": ARN, "launchType": "FARGATE", "count": 1}
    expected.update(startedBy="ecs", tags=ANY, overrides=ANY, networkConfiguration=ANY)
    ecs.add_response("run_task", run_task_answer, expected)
    with ecs, ec2, s3:
        return asyncio.run(EcsBackend(config, "ecs", clients).launch(1, spec))


def test_failures_in_the_answer_raise_naming_every_reason(clients: AwsClients) -> None:
    answer = {
        "tasks": [],
        "failures": [
            {"arn": "arn:aws:ecs:us-east-1:123456789012:container-instance/x", "reason": "RESOURCE:MEMORY"},
            {"reason": "CapacityUnavailable", "detail": "Fargate capacity is unavailable at this time"},
        ],
    }
    with pytest.raises(CloudError) as raised:
        launch(clients, answer)
    assert raised.value.code == "RunTaskFailure"
    assert "RESOURCE:MEMORY" in str(raised.value)
    assert "CapacityUnavailable (Fargate capacity is unavailable at this time)" in str(raised.value)


def test_an_answer_with_no_task_and_no_failure_is_a_failure_too(clients: AwsClients) -> None:
    with pytest.raises(CloudError, match="no task was started"):
        launch(clients, {"tasks": [], "failures": []})
