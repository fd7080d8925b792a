"""The EC2 backend: one unit = one instance running one worker per vCPU.

- launch: `run_instances` per unit, its user data a shell script (`user_data`) that installs the client's Python
  and this build of scaler when the AMI lacks them, then runs the unit's boot (its one-time manifest from the
  manager's bucket: `aws.shipping`) and powers the instance off when it ends; tagged with the manager id, the
  unit id and the launch time, so that a restarted manager lists and adopts its instances.
- list_units: the manager's instances (`describe_instances` by tag), their state: pending -> PENDING,
  running -> RUNNING, shutting-down/stopping -> STOPPING, terminated/stopped -> GONE.
- terminate: `terminate_instances`, booting ones included (the reference left those running). An instance
  that is gone already is a no-op.
- Spot (`--market-type spot`): `run_instances` asks for a one-time spot instance that AWS terminates when it takes
  the capacity back. Its two-minute warning shows in the instance's spot request (EC2 user guide, "Spot request
  status"): its status code turns `instance-terminated-no-capacity` (or `marked-for-termination`) while the
  instance still runs. When the manager has live spot instances, a listing asks for their requests (one
  `describe_spot_instance_requests` by instance id) and lists an instance so warned with `reclaim_at` (the
  status's update time plus the two minutes), so the manager replaces it at once and the scheduler drains its
  workers.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from scaler.config.sections import EC2WorkerManagerConfig
from scaler.worker_manager.aws.client import AwsClients, CloudError, call
from scaler.worker_manager.aws.shipping import Shipment
from scaler.worker_manager.aws.unit_command import UnitProgram, pool_unit
from scaler.worker_manager.aws.units import make_shipment, with_reports
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.orb_aws_ec2.user_data import user_data
from scaler.worker_manager.ship.environment import UnitEnvironment

logger = logging.getLogger(__name__)

MANAGER_TAG = "scaler-manager-id"
UNIT_TAG = "scaler-unit-id"
LAUNCHED_TAG = "scaler-launched-at"
DEFAULT_AMI_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
#: A spot request's status codes that mean AWS takes its running instance back, and how long that takes.
SPOT_NOTICE_CODES = frozenset(
    {"marked-for-termination", "instance-terminated-no-capacity", "instance-terminated-by-price"}
)
SPOT_NOTICE_SECONDS = 120.0
#: Instance ids per filter of one describe call (EC2 refuses filters with too many values).
FILTER_VALUES = 100
GONE = UnitState.GONE
_STATES = {
    "pending": UnitState.PENDING, "running": UnitState.RUNNING, "shutting-down": UnitState.STOPPING,
    "stopping": UnitState.STOPPING, "stopped": UnitState.GONE, "terminated": UnitState.GONE,
}  # fmt: skip


class Ec2Backend:
    def __init__(
        self,
        config: EC2WorkerManagerConfig,
        manager_id: str,
        clients: AwsClients,
        environment: UnitEnvironment | None = None,
        program: UnitProgram | None = None,
    ) -> None:
        self._config = config
        self._manager_id = manager_id
        self._clients = clients
        self._program = program or pool_unit(config.lease_seconds)
        self.shipment: Shipment = make_shipment(
            config, clients, manager_id, config.boot_timeout_seconds, environment, config.requirements_txt
        )
        self._workers_per_unit = 1
        self._image_id = config.image_id
        self._instance_of_unit: dict[str, str] = {}

    def prepare_now(self) -> None:
        """Blocking, before the manager's loop runs: how many vCPUs (workers) an instance has."""
        try:
            described = self._clients.call_now(
                "ec2", "describe_instance_types", InstanceTypes=[self._config.instance_type]
            )
            self._workers_per_unit = int(described["InstanceTypes"][0]["VCpuInfo"]["DefaultVCpus"])
        except (CloudError, KeyError, IndexError) as error:
            logger.warning("could not look the instance type up (%s): one worker per instance", error)

    @property
    def workers_per_unit(self) -> int:
        return self._workers_per_unit

    # ------------------------------------------------------------ the contract

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        image_id = await self._image()
        launched: list[str] = []
        for _ in range(count):
            unit_id = uuid.uuid4().hex[:16]
            try:
                await self._run_instance(spec, unit_id, image_id)
            except CloudError:
                if launched:
                    return launched
                raise
            launched.append(unit_id)
        return launched

    async def list_units(self) -> list[UnitInfo]:
        ec2 = self._clients["ec2"]
        filters = [{"Name": f"tag:{MANAGER_TAG}", "Values": [self._manager_id]}]
        reservations = await call(_all_reservations, ec2, filters)
        instances = [instance for reservation in reservations for instance in reservation.get("Instances", [])]
        spot = [i["InstanceId"] for i in instances if i.get("InstanceLifecycle") == "spot" and _state(i) is not GONE]
        notices = await call(_spot_notices, ec2, spot) if spot else {}  # only a manager with live spot instances asks
        units = []
        for instance in instances:
            tags = {tag["Key"]: tag["Value"] for tag in instance.get("Tags", [])}
            unit_id = tags.get(UNIT_TAG)
            if unit_id is None:
                continue
            instance_id = instance["InstanceId"]
            self._instance_of_unit[unit_id] = instance_id
            state = _state(instance)
            launched = instance.get("LaunchTime")
            created_at = float(tags.get(LAUNCHED_TAG, launched.timestamp() if launched else 0.0))
            reasons = [instance.get("StateTransitionReason"), instance.get("StateReason", {}).get("Message")]
            detail = "; ".join([f"instance {instance_id}", *(reason for reason in reasons if reason)])
            notice = notices.get(instance_id)
            reclaim_at = notice + SPOT_NOTICE_SECONDS if notice is not None and state is not GONE else None
            units.append(UnitInfo(unit_id, state, created_at, detail=detail, reclaim_at=reclaim_at))
        return await with_reports(self.shipment, units, time.time()) if units else units

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        if not set(unit_ids) <= self._instance_of_unit.keys():
            await self.list_units()
        instances = [self._instance_of_unit[unit_id] for unit_id in unit_ids if unit_id in self._instance_of_unit]
        if instances:
            try:
                await call(self._clients["ec2"].terminate_instances, InstanceIds=instances)
            except CloudError as error:
                if error.code != "InvalidInstanceID.NotFound":
                    raise

    async def close(self) -> None:
        return None

    async def public_address(self, unit_id: str) -> str | None:
        """The public IP of the unit's instance, or None."""
        if unit_id not in self._instance_of_unit:
            await self.list_units()
        instance_id = self._instance_of_unit.get(unit_id)
        if instance_id is None:
            return None
        described = await call(self._clients["ec2"].describe_instances, InstanceIds=[instance_id])
        for reservation in described.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance.get("PublicIpAddress"):
                    return str(instance["PublicIpAddress"])
        return None

    # ------------------------------------------------------------ helpers

    async def _image(self) -> str:
        if self._image_id is None:
            parameter = await call(self._clients["ssm"].get_parameter, Name=DEFAULT_AMI_PARAMETER)
            self._image_id = str(parameter["Parameter"]["Value"])
            logger.info("instances boot from %s (the latest Amazon Linux 2023)", self._image_id)
        return self._image_id

    async def _run_instance(self, spec: LaunchSpec, unit_id: str, image_id: str) -> None:
        config = self._config
        program, environment, reach = self._program(spec, unit_id, self._workers_per_unit)
        launch = await self.shipment.launch(unit_id, program, environment, reach)
        script = user_data(launch, launch.report_url, unit_id, self._manager_id)
        if config.debug_dump_path:
            await asyncio.to_thread(Path(config.debug_dump_path).write_text, script)
        tags = [
            {"Key": MANAGER_TAG, "Value": self._manager_id},
            {"Key": UNIT_TAG, "Value": unit_id},
            {"Key": LAUNCHED_TAG, "Value": f"{time.time():.3f}"},
            {"Key": "Name", "Value": f"scaler-{self._manager_id}-{unit_id}"},
            *({"Key": key, "Value": value} for key, value in _pairs(config.instance_tags)),
        ]
        arguments: dict[str, Any] = {
            "ImageId": image_id,
            "InstanceType": config.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": script,
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}],
            "InstanceInitiatedShutdownBehavior": "terminate",
        }
        if config.market_type == "spot":
            options = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
            if config.spot_max_price is not None:
                options["MaxPrice"] = f"{config.spot_max_price:.6f}".rstrip("0").rstrip(".")
            arguments["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": options}
        if config.key_name:
            arguments["KeyName"] = config.key_name
        if config.subnet_id:
            arguments["SubnetId"] = config.subnet_id
        groups = [group.strip() for group in config.security_group_ids.split(",") if group.strip()]
        if groups:
            arguments["SecurityGroupIds"] = groups
        await call(self._clients["ec2"].run_instances, **arguments)


def _pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(","):
        if item.strip():
            key, separator, value = item.partition("=")
            if not separator or not key.strip():
                raise ValueError(f"--instance-tags {text!r}: expected KEY=VALUE,KEY=VALUE")
            pairs.append((key.strip(), value.strip()))
    return pairs


def _state(instance: dict[str, Any]) -> UnitState:
    return _STATES.get(instance.get("State", {}).get("Name", ""), UnitState.PENDING)


def _spot_notices(ec2: Any, instance_ids: list[str]) -> dict[str, float]:
    """Which of these spot instances AWS is taking back, and since when (wall clock): from their spot requests."""
    notices: dict[str, float] = {}
    for start in range(0, len(instance_ids), FILTER_VALUES):
        filters = [{"Name": "instance-id", "Values": instance_ids[start : start + FILTER_VALUES]}]
        for page in ec2.get_paginator("describe_spot_instance_requests").paginate(Filters=filters):
            for request in page.get("SpotInstanceRequests", []):
                status = request.get("Status", {})
                if status.get("Code") in SPOT_NOTICE_CODES and "InstanceId" in request:
                    updated = status.get("UpdateTime")
                    notices[request["InstanceId"]] = updated.timestamp() if updated is not None else time.time()
    return notices


def _all_reservations(ec2: Any, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reservations: list[dict[str, Any]] = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        reservations.extend(page.get("Reservations", []))
    return reservations
