"""Create what an `aws_hpc` manager needs, as a launcher file names it: the S3 bucket, a Fargate compute
environment, the job queue and a job definition that runs `scaler.worker_manager.aws_hpc.job_runner`.

    python -m scaler.worker_manager.aws_hpc.provision config/aws_batch.toml [--image IMAGE]

Every `[[worker_manager]]` entry of type aws_hpc is provisioned; what exists already is kept. Against the fake
cloud (`scaler_fake_cloud`, AWS_ENDPOINT_URL set) this is the whole set-up of a rehearsal; against AWS it needs
the default VPC and the IAM permissions listed in docs/worker_managers.md, and IMAGE must be an image that has
Python, boto3 and scaler (docker/batch-job.Dockerfile builds one).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from scaler.config.sections import AWSHPCWorkerManagerConfig
from scaler.worker_manager.aws.client import AwsClients, CloudError
from scaler.worker_manager.aws_hpc.job_runner import JOB_PARAMETERS, NONE
from scaler.worker_manager.ship.distributions import this_python

DEFAULT_IMAGE = "scaler-batch-job:latest"
ENVIRONMENT_NAME = "scaler-batch-fargate"
SERVICE_ROLE = "scaler-batch-service-role"
JOB_ROLE = "scaler-batch-job-role"
#: The command of the job definition, with the runner's parameters.
JOB_COMMAND = ["python3", "-m", "scaler.worker_manager.aws_hpc.job_runner", *(f"Ref::{p}" for p in JOB_PARAMETERS)]


def provision(config: AWSHPCWorkerManagerConfig, image: str) -> list[str]:
    """Create what is missing; a line per resource saying what was done."""
    aws = AwsClients(config.aws_region, endpoint_url=config.aws_endpoint_url)
    return [
        _bucket(aws, config),
        _job_queue(aws, config),
        _job_definition(aws, config, image),
    ]


def _bucket(aws: AwsClients, config: AWSHPCWorkerManagerConfig) -> str:
    try:
        aws.call_now("s3", "head_bucket", Bucket=config.s3_bucket)
        return f"bucket {config.s3_bucket}: exists"
    except CloudError:
        pass
    request: dict[str, Any] = {"Bucket": config.s3_bucket}
    if config.aws_region != "us-east-1":
        request["CreateBucketConfiguration"] = {"LocationConstraint": config.aws_region}
    aws.call_now("s3", "create_bucket", **request)
    rule = {"ID": "scaler-task-payloads", "Status": "Enabled", "Filter": {"Prefix": f"{config.s3_prefix}/"},
            "Expiration": {"Days": 1}}  # fmt: skip
    aws.call_now(
        "s3", "put_bucket_lifecycle_configuration", Bucket=config.s3_bucket, LifecycleConfiguration={"Rules": [rule]}
    )
    return f"bucket {config.s3_bucket}: created (task objects left behind expire after a day)"


def _role(aws: AwsClients, name: str, service: str) -> str:
    try:
        return str(aws.call_now("iam", "get_role", RoleName=name)["Role"]["Arn"])
    except CloudError:
        trust = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]}  # fmt: skip
        role = aws.call_now("iam", "create_role", RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
        return str(role["Role"]["Arn"])


def _job_queue(aws: AwsClients, config: AWSHPCWorkerManagerConfig) -> str:
    if aws.call_now("batch", "describe_job_queues", jobQueues=[config.job_queue])["jobQueues"]:
        return f"job queue {config.job_queue}: exists"
    found = aws.call_now("batch", "describe_compute_environments", computeEnvironments=[ENVIRONMENT_NAME])
    if not found["computeEnvironments"]:
        subnets = aws.call_now("ec2", "describe_subnets", Filters=[{"Name": "default-for-az", "Values": ["true"]}])
        groups = aws.call_now("ec2", "describe_security_groups", GroupNames=["default"])
        aws.call_now(
            "batch", "create_compute_environment", computeEnvironmentName=ENVIRONMENT_NAME, type="MANAGED",
            state="ENABLED", serviceRole=_role(aws, SERVICE_ROLE, "batch.amazonaws.com"),
            computeResources={
                "type": "FARGATE", "maxvCpus": 256,
                "subnets": [subnet["SubnetId"] for subnet in subnets["Subnets"]],
                "securityGroupIds": [group["GroupId"] for group in groups["SecurityGroups"]],
            },
        )  # fmt: skip
    aws.call_now(
        "batch", "create_job_queue", jobQueueName=config.job_queue, state="ENABLED", priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ENVIRONMENT_NAME}],
    )  # fmt: skip
    return f"job queue {config.job_queue}: created on Fargate compute environment {ENVIRONMENT_NAME}"


def _job_definition(aws: AwsClients, config: AWSHPCWorkerManagerConfig, image: str) -> str:
    name = config.job_definition.split(":")[0]
    found = aws.call_now("batch", "describe_job_definitions", jobDefinitionName=name, status="ACTIVE")
    if found["jobDefinitions"]:
        return f"job definition {name}: exists (revision {found['jobDefinitions'][-1]['revision']})"
    role = _role(aws, JOB_ROLE, "ecs-tasks.amazonaws.com")
    aws.call_now(
        "batch", "register_job_definition", jobDefinitionName=name, type="container",
        platformCapabilities=["FARGATE"],
        parameters={parameter: NONE for parameter in JOB_PARAMETERS},
        timeout={"attemptDurationSeconds": config.job_timeout_minutes * 60},
        containerProperties={
            "image": image, "command": JOB_COMMAND, "jobRoleArn": role, "executionRoleArn": role,
            "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "2048"}],
            "networkConfiguration": {"assignPublicIp": "ENABLED"},
            # the worker image's contract: the client's Python, which the manager checks at start
            "environment": [{"name": "PYTHON_VERSION", "value": this_python()}],
        },
    )  # fmt: skip
    return f"job definition {name}: registered (image {image})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(  # flags only as written in full (as SettingsParser)
        allow_abbrev=False,
        prog="python -m scaler.worker_manager.aws_hpc.provision",
        description="Create the S3 bucket, Batch job queue and job definition each aws_hpc manager of FILE names.",
    )
    parser.add_argument("file", help="a launcher file (scaler FILE) with [[worker_manager]] entries of type aws_hpc")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="container image of the job definition")
    arguments = parser.parse_args(argv)
    from scaler.config.loader import load_launcher_file
    from scaler.config.manager_types import MANAGER_TYPES, missing_extra

    problem = missing_extra(MANAGER_TYPES["aws_hpc"])
    if problem is not None:
        print(f"provision: {problem}", file=sys.stderr)
        return 2
    from scaler.config.toml_file import ConfigError

    try:
        managers = load_launcher_file(arguments.file).worker_managers
    except ConfigError as error:
        print(f"provision: {error}", file=sys.stderr)
        return 2
    entries = [manager for manager in managers if isinstance(manager, AWSHPCWorkerManagerConfig)]
    if not entries:
        print(f"provision: {arguments.file} has no [[worker_manager]] of type aws_hpc", file=sys.stderr)
        return 2
    for entry in entries:
        try:
            for line in provision(entry, arguments.image):
                print(line)
        except CloudError as error:
            print(f"provision: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
