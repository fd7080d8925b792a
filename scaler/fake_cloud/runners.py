"""What makes the fake cloud run things: each step, every ECS task and EC2 instance in moto is matched with a
local process.

- A new ECS task (desired RUNNING) is PENDING for the boot delay, then its container command
  (`COMMAND` in its container overrides, as the reference image runs it with `sh -c`) starts and the task is
  RUNNING. A new EC2 instance is `pending` for the boot delay, then its user data runs as a shell script and it is
  `running`. The image is this machine: the command finds this interpreter first on its PATH, and talks to the
  fake cloud through `AWS_ENDPOINT_URL`.
- A task stopped or an instance terminated through the API: its process group gets SIGTERM, then SIGKILL after
  a grace period; until the group has exited the task is STOPPING (the instance shutting-down), as in AWS.
- A process that ends on its own: the task is STOPPED ("Essential container in task exited") or the instance
  terminated, as AWS does when a container or a machine's main program ends.
- A spot instance (launched with `InstanceMarketOptions`) has the spot request EC2 makes (`ec2_spot`); an
  interrupted one runs on through its notice (`spot_notice_seconds`), then EC2 terminates it as above.

moto's own state is changed in place (it runs in this process); nothing here reads a wall clock but `now`.
"""

from __future__ import annotations

import base64
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaler.fake_cloud.launched import LaunchedProcess

#: How long an interrupted EC2 spot instance runs on before EC2 terminates it, as in AWS.
SPOT_NOTICE_SECONDS = 120.0


@dataclass
class Launch:
    """A resource the fake cloud knows: seen at `seen_at`, its process once booted."""

    seen_at: float
    process: LaunchedProcess | None = None


@dataclass
class RunnerSettings:
    endpoint_url: str
    boot_seconds: float = 0.0
    log_directory: Path = Path("fake-cloud-logs")
    spot_notice_seconds: float = SPOT_NOTICE_SECONDS
    extra_environment: dict[str, str] = field(default_factory=dict)


def base_environment(settings: RunnerSettings, region: str) -> dict[str, str]:
    """What every launched command sees: this interpreter first on PATH, the fake endpoint, test credentials."""
    environment = dict(os.environ)
    environment["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{environment.get('PATH', '')}"
    environment.update(
        AWS_ENDPOINT_URL=settings.endpoint_url,
        AWS_DEFAULT_REGION=region,
        AWS_REGION=region,
        AWS_ACCESS_KEY_ID=environment.get("AWS_ACCESS_KEY_ID", "testing"),
        AWS_SECRET_ACCESS_KEY=environment.get("AWS_SECRET_ACCESS_KEY", "testing"),
    )
    environment.update(settings.extra_environment)
    return environment


class EcsRunner:
    def __init__(self, settings: RunnerSettings) -> None:
        self.settings = settings
        self.launches: dict[str, Launch] = {}  #: task ARN -> launch

    def step(self, now: float) -> None:
        from moto.ecs.models import ecs_backends

        for _account, regions in list(ecs_backends.items()):
            for region, backend in list(regions.items()):
                for tasks in list(backend.tasks.values()):
                    for arn, task in list(tasks.items()):
                        self._follow(now, region, arn, task)

    def _follow(self, now: float, region: str, arn: str, task: Any) -> None:
        launch = self.launches.get(arn)
        if task.desired_status != "RUNNING" or task.last_status == "STOPPED":
            self._stopping(now, arn, task)
            return
        if launch is None:  # a task the API did not announce (moto's own, a reset)
            launch = self.launches[arn] = Launch(now)
        if launch.process is None:
            if now - launch.seen_at >= self.settings.boot_seconds:
                launch.process = self._start(region, arn, task)
                task.last_status = "RUNNING"
            else:
                task.last_status = "PENDING"
            return
        code = launch.process.exit_code()
        if code is not None:
            launch.process.kill()  # whatever the container's main process left behind goes with it
            task.last_status = "STOPPED"
            task.desired_status = "STOPPED"
            task.stopped_reason = f"Essential container in task exited (exit code {code})"
            for container in getattr(task, "containers", []):
                container.exit_code = code

    def _stopping(self, now: float, arn: str, task: Any) -> None:
        """A task being stopped is STOPPING until its processes have exited, then STOPPED (as in ECS)."""
        launch = self.launches.get(arn)
        if launch is not None and launch.process is not None and launch.process.group_alive():
            launch.process.stop(now)
            launch.process.step(now)
            task.last_status = "STOPPING"
        elif task.last_status != "STOPPED":
            task.last_status = "STOPPED"

    def interrupt(self, now: float, wall_time: float, arn: str) -> bool:
        """A Fargate Spot interruption: the task says why and when, and is stopped (SIGTERM, then SIGKILL after the
        grace period). False when no task that is not stopped has that ARN."""
        from datetime import datetime, timezone

        from moto.ecs.models import ecs_backends

        for _account, regions in list(ecs_backends.items()):
            for backend in list(regions.values()):
                for tasks in list(backend.tasks.values()):
                    task: Any = tasks.get(arn)
                    if task is None or task.last_status == "STOPPED" or getattr(task, "stop_code", None):
                        continue
                    task.stop_code = "SpotInterruption"
                    task.stopping_at = datetime.fromtimestamp(wall_time, timezone.utc)
                    task.stopped_reason = "Your Spot Task was interrupted."
                    task.desired_status = "STOPPED"
                    self._stopping(now, arn, task)
                    return True
        return False

    def launched_by_api(self, now: float, tasks: list[Any]) -> None:
        """Right after `run_task`: the tasks are booting."""
        for task in tasks:
            self.launches.setdefault(task.task_arn, Launch(now))
            task.last_status = "PROVISIONING"

    def stopped_by_api(self, now: float, arns: list[str]) -> None:
        """Right after `stop_task` (which moto answers with STOPPED at once)."""
        from moto.ecs.models import ecs_backends

        for _account, regions in list(ecs_backends.items()):
            for backend in list(regions.values()):
                for tasks in list(backend.tasks.values()):
                    for arn in arns:
                        if arn in tasks:
                            self._stopping(now, arn, tasks[arn])

    def _start(self, region: str, arn: str, task: Any) -> LaunchedProcess:
        environment = base_environment(self.settings, region)
        environment.update(_task_definition_secrets(region, task))  # as ECS does, from Secrets Manager
        for override in task.overrides.get("containerOverrides", []):
            for variable in override.get("environment", []):
                environment[variable["name"]] = variable["value"]
        environment["ECS_TASK_ARN"] = arn
        command = environment.get("COMMAND", "echo 'the task has no COMMAND override'; exit 1")
        log = self.settings.log_directory / "ecs" / f"{arn.rsplit('/', 1)[-1]}.log"
        return LaunchedProcess(["/bin/sh", "-c", command], environment, log)

    def close(self) -> None:
        for launch in self.launches.values():
            if launch.process is not None:
                launch.process.kill()


@dataclass(frozen=True)
class SpotNotice:
    """An interrupted spot instance's notice: when it ends (monotonic) and the wall-clock time then."""

    ends_at: float
    ends_at_wall: float


class Ec2Runner:
    def __init__(self, settings: RunnerSettings) -> None:
        self.settings = settings
        self.launches: dict[str, Launch] = {}  #: instance id -> launch
        self.notices: dict[str, SpotNotice] = {}  #: interrupted spot instance id -> its notice

    def step(self, now: float) -> None:
        from moto.ec2.models import ec2_backends

        for _account, regions in list(ec2_backends.items()):
            for region, backend in list(regions.items()):
                for instance in list(backend.all_instances()):
                    self._follow(now, region, backend, instance)

    def _follow(self, now: float, region: str, backend: Any, instance: Any) -> None:
        from moto.ec2.models.instances import InstanceState

        launch = self.launches.get(instance.id)
        notice = self.notices.get(instance.id)
        if notice is not None and now >= notice.ends_at and instance._state.name in ("pending", "running"):
            from scaler.fake_cloud import ec2_spot

            ec2_spot.terminated_by_service(instance, notice.ends_at_wall)
        if instance._state.name in ("shutting-down", "terminated", "stopping", "stopped"):
            self._stopping(now, instance)
            return
        if launch is None:  # an instance the API did not announce
            launch = self.launches[instance.id] = Launch(now)
            instance._state = InstanceState("pending", 0)
        if launch.process is None:
            if now - launch.seen_at >= self.settings.boot_seconds:
                launch.process = self._start(region, instance)
                instance._state = InstanceState("running", 16)
            return
        if launch.process.exit_code() is not None:
            launch.process.kill()
            backend.terminate_instances([instance.id])

    def _stopping(self, now: float, instance: Any) -> None:
        """An instance being terminated is shutting-down until its processes have exited (as in EC2)."""
        from moto.ec2.models.instances import InstanceState

        launch = self.launches.get(instance.id)
        if instance._state.name not in ("shutting-down", "terminated"):
            return  # stopped instances keep their state
        if launch is not None and launch.process is not None and launch.process.group_alive():
            launch.process.stop(now)
            launch.process.step(now)
            instance._state = InstanceState("shutting-down", 32)
        elif instance._state.name != "terminated":
            instance._state = InstanceState("terminated", 48)

    def launched_by_api(self, now: float, wall_time: float, instances: list[Any], spot: bool = False) -> None:
        """Right after `run_instances`: the instances are booting; spot ones (`InstanceMarketOptions`) have the spot
        request EC2 makes."""
        from moto.ec2.models.instances import InstanceState

        from scaler.fake_cloud import ec2_spot

        for instance in instances:
            self.launches.setdefault(instance.id, Launch(now))
            instance._state = InstanceState("pending", 0)
            if spot:
                ec2_spot.open_request(instance, wall_time)

    def terminated_by_api(self, now: float, wall_time: float, instance_ids: list[str]) -> None:
        """Right after `terminate_instances` (which moto answers with terminated at once)."""
        from scaler.fake_cloud import ec2_spot

        for instance in _instances():
            if instance.id in instance_ids:
                ec2_spot.terminated_by_user(instance, wall_time)
                self._stopping(now, instance)

    def interrupt(self, now: float, wall_time: float, instance_id: str) -> str | None:
        """An EC2 spot interruption: the instance's spot request gives the two-minute warning now, and EC2
        terminates the instance when the notice (`spot_notice_seconds`) ends. What was done; None when there is no
        such instance; `Refused` naming why when it cannot be interrupted."""
        from scaler.fake_cloud import ec2_spot
        from scaler.fake_cloud.faults import Refused

        instance = next((instance for instance in _instances() if instance.id == instance_id), None)
        if instance is None:
            return None
        request = ec2_spot.request_of(instance)
        if request is None and instance.lifecycle == "spot":
            raise Refused(f"EC2 instance {instance_id} was launched by a spot request or fleet: only the spot "
                          "instances run_instances launches are interrupted here")  # fmt: skip
        if request is None:
            raise Refused(f"EC2 instance {instance_id} is not a spot instance (launched without InstanceMarketOptions "
                          "MarketType spot): only spot capacity is taken back")  # fmt: skip
        if instance._state.name not in ("pending", "running"):
            raise Refused(
                f"EC2 instance {instance_id} is {instance._state.name}: only a running instance is interrupted"
            )
        if instance_id in self.notices:
            raise Refused(f"EC2 instance {instance_id} has had its interruption notice already")
        seconds = self.settings.spot_notice_seconds
        self.notices[instance_id] = SpotNotice(now + seconds, wall_time + seconds)
        ec2_spot.warn(request, wall_time)
        return (f"EC2 instance {instance_id}: spot interruption notice (spot request {request.id}: "
                f"{ec2_spot.INTERRUPTED}); EC2 terminates it in {seconds:g} s")  # fmt: skip

    def _start(self, region: str, instance: Any) -> LaunchedProcess:
        environment = base_environment(self.settings, region)
        environment["EC2_INSTANCE_ID"] = instance.id
        script = _user_data(instance.user_data) or "#!/bin/sh\necho 'the instance has no user data'; exit 1\n"
        path = self.settings.log_directory / "ec2" / f"{instance.id}.user-data.sh"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)  # user data may hold the workers' keys
        path.write_text(script)
        return LaunchedProcess(["/bin/sh", str(path)], environment, path.with_suffix(".log"))

    def close(self) -> None:
        for launch in self.launches.values():
            if launch.process is not None:
                launch.process.kill()


def _instances() -> list[Any]:
    """Every EC2 instance moto holds, in every account and region."""
    from moto.ec2.models import ec2_backends

    return [instance for regions in list(ec2_backends.values()) for backend in list(regions.values())
            for instance in list(backend.all_instances())]  # fmt: skip


def _task_definition_secrets(region: str, task: Any) -> dict[str, str]:
    """The `secrets` of the task's container definitions, read from moto's Secrets Manager (what ECS puts in the
    container's environment before it starts)."""
    from moto.ecs.models import ecs_backends
    from moto.secretsmanager.models import secretsmanager_backends

    found: dict[str, str] = {}
    for account, regions in list(ecs_backends.items()):
        backend = regions.get(region) if hasattr(regions, "get") else None
        if backend is None:
            continue
        try:
            definition = backend.describe_task_definition(task.task_definition_arn)
        except Exception:  # not this account's
            continue
        containers: list[dict[str, Any]] = list(definition.container_definitions)
        for container in containers:
            for secret in container.get("secrets", []) or []:
                secrets: Any = secretsmanager_backends[account][region]
                found[secret["name"]] = secrets.get_secret_value(secret["valueFrom"], None, None)["SecretString"]
    return found


def _user_data(raw: Any) -> str:
    if not raw:
        return ""
    value = raw[0] if isinstance(raw, list) else raw
    text = str(value)
    try:
        return base64.b64decode(text, validate=True).decode()
    except ValueError:
        return text
