"""The ECS backend: one unit = one Fargate task running `ecs_task_cpu` workers.

- launch: `run_task` per unit, with the worker image's three variables as container overrides
  (`PYTHON_VERSION`, `PYTHON_REQUIREMENTS`: this build of scaler, `COMMAND`: the unit's boot, which reads its
  one-time manifest from the manager's bucket; `aws.shipping`), tagged with the manager id and the unit id (and
  `startedBy` = the manager id), so that a restarted manager lists and adopts its tasks.
- list_units: the manager's tasks (`list_tasks` by `startedBy`, running and recently stopped), their state from
  `lastStatus`: PROVISIONING/PENDING/ACTIVATING -> PENDING, RUNNING -> RUNNING, the way down -> STOPPING,
  STOPPED -> GONE (with the stop reason as detail), and what their boot reports say.
- terminate: `stop_task` (the container gets SIGTERM: its workers leave the scheduler gracefully).
- Fargate Spot (`--ecs-capacity-provider FARGATE_SPOT`): a task AWS interrupts shows `stopCode`
  `SpotInterruption` from the two-minute warning on; it is listed with `reclaim_at` (its `stoppingAt` plus the two
  minutes), so the manager replaces it at once and the scheduler drains its workers.
The cluster, the task definition and the bucket are created when missing, on first use; every call runs off the
loop. The image defaults to the project's worker image in the account's ECR (`scaler-worker:latest`).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from scaler.config.sections import ECSWorkerManagerConfig
from scaler.worker_manager.aws.client import AwsClients, CloudError, call
from scaler.worker_manager.aws.shipping import Shipment
from scaler.worker_manager.aws.unit_command import UnitProgram, pool_unit
from scaler.worker_manager.aws.units import make_shipment, with_reports
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.ship.environment import UnitEnvironment

logger = logging.getLogger(__name__)

CONTAINER_NAME = "scaler-container"
MANAGER_TAG = "scaler-manager-id"
UNIT_TAG = "scaler-unit-id"
LAUNCHED_TAG = "scaler-launched-at"  #: seconds since the epoch, for tasks whose createdAt is not reported
EXECUTION_ROLE = "ecsTaskExecutionRole"
#: The project's worker image (docker/worker.Dockerfile), pushed to the account's ECR: the default image.
WORKER_IMAGE_REPOSITORY = "scaler-worker"
EXECUTION_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
#: What ECS says of a Fargate Spot task it takes back, and how long before it stops the task.
SPOT_INTERRUPTION = "SpotInterruption"
SPOT_NOTICE_SECONDS = 120.0
#: Memory (GB) Fargate allows per task size (vCPU): (smallest, largest).
FARGATE_MEMORY_GB = {1: (2, 8), 2: (4, 16), 4: (8, 30), 8: (16, 60), 16: (32, 120)}
_STATES = {
    "PROVISIONING": UnitState.PENDING, "PENDING": UnitState.PENDING, "ACTIVATING": UnitState.PENDING,
    "RUNNING": UnitState.RUNNING, "DEACTIVATING": UnitState.STOPPING, "STOPPING": UnitState.STOPPING,
    "DEPROVISIONING": UnitState.STOPPING, "STOPPED": UnitState.GONE, "DELETED": UnitState.GONE,
}  # fmt: skip


def fargate_size_problem(cpu: int, memory_gb: int) -> str | None:
    """Why Fargate would refuse this task size, or None."""
    limits = FARGATE_MEMORY_GB.get(cpu)
    if limits is None:
        return f"--ecs-task-cpu {cpu}: Fargate tasks have 1, 2, 4, 8 or 16 vCPUs"
    low, high = limits
    if not low <= memory_gb <= high:
        return f"--ecs-task-memory {memory_gb}: a Fargate task of {cpu} vCPU needs {low} to {high} GB"
    return None


class EcsBackend:
    def __init__(
        self,
        config: ECSWorkerManagerConfig,
        manager_id: str,
        clients: AwsClients | None = None,
        environment: UnitEnvironment | None = None,
        program: UnitProgram | None = None,
    ) -> None:
        self._config = config
        self._manager_id = manager_id
        self._clients = clients
        self._environment = environment  #: planned and checked when the manager started (None: planned here)
        self._program = program or pool_unit(config.lease_seconds)
        self._shipment: Shipment | None = None
        self._task_definition_arn: str | None = None
        self._network: dict[str, Any] | None = None
        self._unit_of_arn: dict[str, str] = {}  #: task ARN -> unit id, as tagged

    @property
    def workers_per_unit(self) -> int:
        return self._config.ecs_task_cpu

    # ------------------------------------------------------------ the contract

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        await self._prepare(spec)
        launched: list[str] = []
        for _ in range(count):
            unit_id = uuid.uuid4().hex[:16]
            try:
                await self._run_task(spec, unit_id)
            except CloudError:
                if launched:  # a partial success: the reconciler counts the difference as a failure
                    logger.warning("launched %d of %d ECS task(s)", len(launched), count)
                    return launched
                raise
            launched.append(unit_id)
        return launched

    async def list_units(self) -> list[UnitInfo]:
        ecs, cluster = self._ecs, self._config.ecs_cluster
        arns: list[str] = []
        for desired in ("RUNNING", "STOPPED"):
            try:
                pages = await call(_all_task_arns, ecs, cluster, self._started_by, desired)
            except CloudError as error:
                if error.code == "ClusterNotFoundException":
                    return []  # nothing launched yet
                raise
            arns.extend(pages)
        units: list[UnitInfo | None] = []
        for start in range(0, len(arns), 100):
            batch = arns[start : start + 100]
            described = await call(ecs.describe_tasks, cluster=cluster, tasks=batch, include=["TAGS"])
            units.extend(self._unit(task) for task in described.get("tasks", []))
        found = [unit for unit in units if unit is not None]
        return await with_reports(self.shipment, found, time.time()) if found else found

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        wanted = set(unit_ids)
        if not wanted <= set(self._unit_of_arn.values()):
            await self.list_units()  # a fresh instance learns which task holds which unit
        for arn, unit_id in list(self._unit_of_arn.items()):
            if unit_id in wanted:
                try:
                    await call(self._ecs.stop_task, cluster=self._config.ecs_cluster, task=arn, reason=reason[:255])
                except CloudError as error:
                    if error.code not in ("InvalidParameterException", "ClientException"):
                        raise  # an unknown or finished task is a no-op (the contract); anything else is not
                except Exception as error:  # moto answers an unknown task with a server error
                    logger.debug("stop_task %s: %s", arn, error)

    async def close(self) -> None:
        return None

    async def public_address(self, unit_id: str) -> str | None:
        """The public IP AWS gave the unit's network interface (assignPublicIp), or None."""
        if unit_id not in self._unit_of_arn.values():
            await self.list_units()
        arns = [arn for arn, unit in self._unit_of_arn.items() if unit == unit_id]
        if not arns:
            return None
        described = await call(self._ecs.describe_tasks, cluster=self._config.ecs_cluster, tasks=arns)
        interfaces = [
            detail["value"]
            for task in described.get("tasks", [])
            for attachment in task.get("attachments", [])
            for detail in attachment.get("details", [])
            if detail.get("name") == "networkInterfaceId"
        ]
        if not interfaces:
            return None
        assert self._clients is not None
        found = await call(self._clients["ec2"].describe_network_interfaces, NetworkInterfaceIds=interfaces)
        for interface in found.get("NetworkInterfaces", []):
            public = interface.get("Association", {}).get("PublicIp")
            if public:
                return str(public)
        return None

    # ------------------------------------------------------------ helpers

    @property
    def _ecs(self) -> Any:
        if self._clients is None:
            config = self._config
            self._clients = AwsClients(
                config.aws_region, config.aws_access_key_id, config.aws_secret_access_key, config.aws_endpoint_url
            )
        return self._clients["ecs"]

    @property
    def shipment(self) -> Shipment:
        if self._shipment is None:
            self._ecs  # noqa: B018 - the clients exist
            assert self._clients is not None
            config = self._config
            self._shipment = make_shipment(
                config, self._clients, self._manager_id, config.boot_timeout_seconds, self._environment,
                config.ecs_python_requirements,
            )  # fmt: skip
        return self._shipment

    @property
    def _started_by(self) -> str:
        return self._manager_id[:36]  # ECS limit

    def _unit(self, task: dict[str, Any]) -> UnitInfo | None:
        tags = {tag["key"]: tag["value"] for tag in task.get("tags", [])}
        if tags.get(MANAGER_TAG) != self._manager_id or UNIT_TAG not in tags:
            return None
        unit_id = tags[UNIT_TAG]
        self._unit_of_arn[task["taskArn"]] = unit_id
        state = _STATES.get(str(task.get("lastStatus")), UnitState.PENDING)
        if task.get("desiredStatus") == "STOPPED" and state is not UnitState.GONE:
            state = UnitState.STOPPING
        created = task.get("createdAt")
        created_at = created.timestamp() if created is not None else float(tags.get(LAUNCHED_TAG, 0.0))
        reason = f": {task['stoppedReason']}" if task.get("stoppedReason") else ""
        detail = f"task {task['taskArn'].rsplit('/', 1)[-1]}{reason}"
        return UnitInfo(unit_id, state, created_at, detail=detail, reclaim_at=_reclaim_at(task, state))

    async def _run_task(self, spec: LaunchSpec, unit_id: str) -> None:
        config = self._config
        program, unit_environment, reach = self._program(spec, unit_id, config.ecs_task_cpu)
        launch = await self.shipment.launch(unit_id, program, unit_environment, reach)
        environment = launch.image_environment()
        if config.ecs_capacity_provider == "FARGATE":
            capacity: dict[str, Any] = {"launchType": "FARGATE"}
        else:
            capacity = {"capacityProviderStrategy": [{"capacityProvider": config.ecs_capacity_provider, "weight": 1}]}
        response = await call(
            self._ecs.run_task,
            cluster=config.ecs_cluster,
            taskDefinition=self._task_definition_arn,
            **capacity,
            count=1,
            startedBy=self._started_by,
            tags=[
                {"key": MANAGER_TAG, "value": self._manager_id},
                {"key": UNIT_TAG, "value": unit_id},
                {"key": LAUNCHED_TAG, "value": f"{time.time():.3f}"},
            ],
            overrides={"containerOverrides": [{"name": CONTAINER_NAME, "environment": environment}]},
            networkConfiguration={"awsvpcConfiguration": self._network},
        )
        failures = response.get("failures") or []
        if failures or len(response.get("tasks", [])) != 1:
            reasons = "; ".join(f"{failure.get('reason')} ({failure.get('detail') or failure.get('arn', '')})"
                                for failure in failures) or "no task was started"  # fmt: skip
            raise CloudError("RunTaskFailure", f"ECS run_task failed: {reasons}")

    async def _prepare(self, spec: LaunchSpec) -> None:
        """The cluster, the task definition (with the workers' keys from Secrets Manager) and the network, once."""
        if self._task_definition_arn is not None:
            return
        config = self._config
        problem = fargate_size_problem(config.ecs_task_cpu, config.ecs_task_memory)
        if problem is not None:
            raise CloudError("InvalidTaskSize", problem)
        ecs = self._ecs
        clusters = await call(ecs.describe_clusters, clusters=[config.ecs_cluster])
        if not any(cluster.get("status") == "ACTIVE" for cluster in clusters.get("clusters", [])):
            logger.info("creating the ECS cluster %s", config.ecs_cluster)
            await call(ecs.create_cluster, clusterName=config.ecs_cluster)
        self._network = await self._network_configuration()
        await self.shipment.prepare()
        self._task_definition_arn = await self._task_definition(await self._image())

    async def _image(self) -> str:
        """The tasks' image: the setting, else the project's worker image in this account's ECR."""
        if self._config.ecs_task_image:
            return self._config.ecs_task_image
        assert self._clients is not None
        account = (await call(self._clients["sts"].get_caller_identity))["Account"]
        image = f"{account}.dkr.ecr.{self._clients.region}.amazonaws.com/{WORKER_IMAGE_REPOSITORY}:latest"
        logger.info("the tasks run the worker image %s (push it there: `scaler --docs bursting`)", image)
        return image

    async def _task_definition(self, image: str) -> str:
        """The family's latest revision when it runs this image at this size; else a new revision that does."""
        config, ecs = self._config, self._ecs
        memory_mb = config.ecs_task_memory * 1024
        try:
            described = await call(ecs.describe_task_definition, taskDefinition=config.ecs_task_definition)
            definition = described["taskDefinition"]
            containers = definition.get("containerDefinitions", [])
            if (containers and containers[0].get("image") == image and not containers[0].get("secrets")
                    and str(definition.get("cpu")) == str(config.ecs_task_cpu * 1024)
                    and str(definition.get("memory")) == str(memory_mb)):  # fmt: skip
                return str(definition["taskDefinitionArn"])
        except CloudError as error:
            if error.code not in ("ClientException", "InvalidParameterException"):
                raise
        logger.info("registering the ECS task definition %s (%s)", config.ecs_task_definition, image)
        registered = await call(
            ecs.register_task_definition,
            family=config.ecs_task_definition,
            requiresCompatibilities=["FARGATE"],
            networkMode="awsvpc",
            runtimePlatform={"cpuArchitecture": "X86_64", "operatingSystemFamily": "LINUX"},
            cpu=str(config.ecs_task_cpu * 1024),
            memory=str(memory_mb),
            executionRoleArn=await self._execution_role(),
            containerDefinitions=[{"name": CONTAINER_NAME, "image": image, "essential": True, "memory": memory_mb}],
        )
        arn = registered["taskDefinition"]["taskDefinitionArn"]
        return str(arn)

    async def _execution_role(self) -> str:
        if self._config.ecs_execution_role_arn:
            return self._config.ecs_execution_role_arn
        assert self._clients is not None
        iam = self._clients["iam"]
        try:
            return str((await call(iam.get_role, RoleName=EXECUTION_ROLE))["Role"]["Arn"])
        except CloudError as error:
            if error.code != "NoSuchEntity":
                raise
        logger.info("creating the IAM role %s", EXECUTION_ROLE)
        trust = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": '
                 '{"Service": "ecs-tasks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}')  # fmt: skip
        created = await call(iam.create_role, RoleName=EXECUTION_ROLE, AssumeRolePolicyDocument=trust)
        await call(iam.attach_role_policy, RoleName=EXECUTION_ROLE, PolicyArn=EXECUTION_POLICY)
        return str(created["Role"]["Arn"])

    async def _network_configuration(self) -> dict[str, Any]:
        config = self._config
        assert self._clients is not None
        ec2 = self._clients["ec2"]
        subnets = [subnet.strip() for subnet in config.ecs_subnets.split(",") if subnet.strip()]
        groups = [group.strip() for group in config.ecs_security_groups.split(",") if group.strip()]
        if subnets == ["default"]:
            found = await call(ec2.describe_subnets, Filters=[{"Name": "default-for-az", "Values": ["true"]}])
            subnets = [subnet["SubnetId"] for subnet in found.get("Subnets", [])]
            if not subnets:
                raise CloudError(
                    "NoDefaultVpc", "--ecs-subnets default: the region has no default VPC; give subnet ids"
                )
        else:
            found = await call(ec2.describe_subnets, SubnetIds=subnets)  # a missing subnet fails here, by name
        if not groups:
            vpc = found["Subnets"][0]["VpcId"]
            default = await call(
                ec2.describe_security_groups,
                Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "group-name", "Values": ["default"]}],
            )
            groups = [group["GroupId"] for group in default.get("SecurityGroups", [])]
        return {"subnets": subnets, "securityGroups": groups, "assignPublicIp": "ENABLED"}


def _all_task_arns(ecs: Any, cluster: str, started_by: str, desired: str) -> list[str]:
    arns: list[str] = []
    for page in ecs.get_paginator("list_tasks").paginate(cluster=cluster, startedBy=started_by, desiredStatus=desired):
        arns.extend(page.get("taskArns", []))
    return arns


def _reclaim_at(task: dict[str, Any], state: UnitState) -> float | None:
    """When AWS takes an interrupted Fargate Spot task back (wall clock); None for any other task."""
    if task.get("stopCode") != SPOT_INTERRUPTION or state is UnitState.GONE:
        return None
    stopping = task.get("stoppingAt")
    return (stopping.timestamp() if stopping is not None else time.time()) + SPOT_NOTICE_SECONDS
