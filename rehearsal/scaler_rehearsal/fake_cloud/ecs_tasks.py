"""ECS tasks on the fake cloud: each task moto holds is matched with a container of its image, run as a local
process group (or by a container engine, `containers.py`).

- A new task (desired RUNNING) is PROVISIONING, then PENDING for the boot delay. Its image must be in the fake
  cloud's catalogue (`images.py`): otherwise it stops as ECS stops it (`stopCode` TaskFailedToStart,
  `stoppedReason` "CannotPullContainerError: ..."). Else its container starts, RUNNING: the image's entrypoint
  with the task definition's environment and secrets and the run's container overrides (`COMMAND`,
  `PYTHON_VERSION`, `PYTHON_REQUIREMENTS`), in a folder and environment of its own (`sandbox.py`).
- A task stopped through the API: its process group gets SIGTERM, then SIGKILL after a grace period; it is
  STOPPING until the group has exited, then STOPPED, as in ECS.
- A container that ends on its own: the task is STOPPED ("Essential container in task exited (exit code N)").
- The task's ENI reports the unit's address (its TEST-NET address when the cloud isolates its units).
- The container's output goes to the fake cloud's log folder, and to CloudWatch Logs when the task definition
  says so (`awslogs`, `task_logs.py`).

moto's own state is changed in place (it runs in this process); nothing here reads a wall clock but `now`.
"""

from __future__ import annotations

from typing import Any

from scaler_rehearsal.fake_cloud.images import Image, pull_error
from scaler_rehearsal.fake_cloud.launched import LaunchedProcess
from scaler_rehearsal.fake_cloud.runners import (
    FakeCloudRunnerSettings,
    KnownResource,
    allocate_address,
    forget_unit,
    start_unit,
)
from scaler_rehearsal.fake_cloud.task_logs import awslogs_stream, forward


class EcsRunner:
    def __init__(self, settings: FakeCloudRunnerSettings) -> None:
        self.settings = settings
        self.launches: dict[str, KnownResource] = {}  #: task ARN -> launch

    def step(self, now: float) -> None:
        for region, _backend, arn, task in _tasks():
            self._follow(now, region, arn, task)

    def _follow(self, now: float, region: str, arn: str, task: Any) -> None:
        launch = self.launches.get(arn)
        if task.desired_status != "RUNNING" or task.last_status == "STOPPED":
            self._stopping(now, arn, task)
            return
        if launch is None:  # a task the API did not announce (moto's own, a reset)
            launch = self._announce(now, task)
        if launch.process is None:
            if now - launch.seen_at < self.settings.boot_seconds:
                task.last_status = "PENDING"
                return
            image = self.settings.images.find(_image_of(task))
            if image is None:
                _failed_to_start(task, pull_error(_image_of(task)))
                return
            launch.process = self._start(region, arn, task, launch, image)
            launch.booted = True
            task.last_status = "RUNNING"
            return
        self._forward_logs(launch)
        code = launch.process.exit_code()
        if code is not None:
            launch.process.kill()  # whatever the container's main process left behind goes with it
            self._forward_logs(launch)
            task.last_status = "STOPPED"
            task.desired_status = "STOPPED"
            task.stopped_reason = f"Essential container in task exited (exit code {code})"
            task.stop_code = "EssentialContainerExited"
            for container in getattr(task, "containers", []):
                container.exit_code = container.exitCode = code
                container.last_status = "STOPPED"
            forget_unit(self.settings, launch)

    def _stopping(self, now: float, arn: str, task: Any) -> None:
        """A task being stopped is STOPPING until its processes have exited, then STOPPED (as in ECS)."""
        launch = self.launches.get(arn)
        if launch is not None and launch.process is not None and not launch.forgotten and launch.process.group_alive():
            launch.process.stop(now)
            launch.process.step(now)
            task.last_status = "STOPPING"
            return
        if task.last_status != "STOPPED":
            task.last_status = "STOPPED"
        if launch is not None:
            self._forward_logs(launch)
            forget_unit(self.settings, launch)

    def interrupt(self, now: float, wall_time: float, arn: str) -> bool:
        """A Fargate Spot interruption: the task says why and when, and is stopped (SIGTERM, then SIGKILL after the
        grace period). False when no task that is not stopped has that ARN."""
        from datetime import datetime, timezone

        for _region, _backend, task_arn, task in _tasks():
            if task_arn != arn or task.last_status == "STOPPED" or getattr(task, "stop_code", None):
                continue
            task.stop_code = "SpotInterruption"
            task.stopping_at = datetime.fromtimestamp(wall_time, timezone.utc)
            task.stopped_reason = "Your Spot Task was interrupted."
            task.desired_status = "STOPPED"
            self._stopping(now, arn, task)
            return True
        return False

    def launched_by_api(self, now: float, tasks: list[Any]) -> None:
        """Right after `run_task`: the tasks are booting, their ENIs have their addresses."""
        for task in tasks:
            self._announce(now, task)
            task.last_status = "PROVISIONING"

    def stopped_by_api(self, now: float, arns: list[str]) -> None:
        """Right after `stop_task` (which moto answers with STOPPED at once)."""
        wanted = set(arns)
        for _region, _backend, arn, task in _tasks():
            if arn in wanted:
                self._stopping(now, arn, task)

    def _announce(self, now: float, task: Any) -> KnownResource:
        launch = self.launches.get(task.task_arn)
        if launch is None:
            launch = self.launches[task.task_arn] = KnownResource(now, name=f"ecs-{task.id}")
            _set_eni_address(task, allocate_address(self.settings, launch))
        return launch

    def _forward_logs(self, launch: KnownResource) -> None:
        if launch.log_destination is not None and launch.process is not None:
            account, region, group, stream = launch.log_destination
            launch.log_offset = forward(account, region, (group, stream), launch.process.log_path, launch.log_offset)

    def _start(self, region: str, arn: str, task: Any, launch: KnownResource, image: Image) -> LaunchedProcess:
        defined = _definition_container(region, task)
        destination = awslogs_stream(defined[1], task.id) if defined is not None else None
        if defined is not None and destination is not None:
            launch.log_destination = (defined[0], region, *destination)
        variables = _container_environment(region, task)
        variables["ECS_TASK_ARN"] = arn
        engine = self.settings.container_engine
        unit = self.settings.sandbox.container(launch.name, image, [], variables, self.settings.endpoint_url, region,
                                               image_environment=engine is None)  # fmt: skip
        log = self.settings.log_directory / "ecs" / f"{task.id}.log"
        if engine is not None:  # the task's image itself, in the local container engine
            from scaler_rehearsal.fake_cloud.containers import ContainerProcess

            cache = self.settings.sandbox.installer_cache
            return ContainerProcess(engine, f"sfc-{task.id}", _image_of(task), unit.environment, log, cache)
        return start_unit(self.settings, launch, unit, log)

    def close(self) -> None:
        for launch in self.launches.values():
            if launch.process is not None:
                launch.process.kill()
            forget_unit(self.settings, launch)


def _tasks() -> list[tuple[str, Any, str, Any]]:
    """(region, backend, task ARN, task) of every ECS task moto holds, in every account and region."""
    from moto.ecs.models import ecs_backends

    found: list[tuple[str, Any, str, Any]] = []
    for _account, regions in list(ecs_backends.items()):
        for region, backend in list(regions.items()):
            for tasks in list(backend.tasks.values()):
                found.extend((region, backend, arn, task) for arn, task in list(tasks.items()))
    return found


def _image_of(task: Any) -> str:
    containers = getattr(task, "containers", [])
    return str(containers[0].image or "") if containers else ""


def _failed_to_start(task: Any, reason: str) -> None:
    """What ECS reports of a task whose container could not start (its image could not be pulled)."""
    task.last_status = "STOPPED"
    task.desired_status = "STOPPED"
    task.stop_code = "TaskFailedToStart"
    task.stopped_reason = reason
    for container in getattr(task, "containers", []):
        container.reason = reason
        container.last_status = "STOPPED"


def _set_eni_address(task: Any, address: str) -> None:
    """The task's ENI: its private address, and its public one when the task asked for it (assignPublicIp)."""
    for attachment in getattr(task, "attachments", []):
        for detail in attachment.get("details", []):
            if detail.get("name") == "privateIPv4Address":
                detail["value"] = address
            if detail.get("name") == "networkInterfaceId":
                _update_interface(task, detail["value"], address)


def _update_interface(task: Any, interface_id: str, address: str) -> None:
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[task._account_id][task.region_name]
    interface = backend.enis.get(interface_id)
    if interface is None:
        return
    interface.private_ip_address = address
    interface.private_ip_addresses = [{"Primary": True, "PrivateIpAddress": address}]
    public = getattr(task, "network_configuration", {}).get("awsvpcConfiguration", {}).get("assignPublicIp")
    if public == "ENABLED":
        interface.public_ip = address


def _definition_container(region: str, task: Any) -> tuple[str, dict[str, Any]] | None:
    """(account, the task definition's first container definition) of the task."""
    from moto.ecs.models import ecs_backends

    for account, regions in list(ecs_backends.items()):
        backend = regions.get(region) if hasattr(regions, "get") else None
        if backend is None:
            continue
        try:
            definition = backend.describe_task_definition(task.task_definition_arn)
        except Exception:  # not this account's
            continue
        containers: list[dict[str, Any]] = list(definition.container_definitions)
        return (account, containers[0]) if containers else None
    return None


def _container_environment(region: str, task: Any) -> dict[str, str]:
    """What ECS puts in the container's environment: the task definition's `environment` and `secrets` (read
    from moto's Secrets Manager), then the run's container overrides."""
    from moto.secretsmanager.models import secretsmanager_backends

    found: dict[str, str] = {}
    defined = _definition_container(region, task)
    if defined is not None:
        account, container = defined
        for variable in container.get("environment", []) or []:
            found[variable["name"]] = variable["value"]
        for secret in container.get("secrets", []) or []:
            secrets: Any = secretsmanager_backends[account][region]
            found[secret["name"]] = secrets.get_secret_value(secret["valueFrom"], None, None)["SecretString"]
    for override in task.overrides.get("containerOverrides", []):
        for variable in override.get("environment", []):
            found[variable["name"]] = variable["value"]
    return found
