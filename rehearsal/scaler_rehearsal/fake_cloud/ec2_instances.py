"""EC2 instances on the fake cloud: each instance moto holds is matched with its user data, run as a local process
group on an Amazon Linux 2023-like unit (`sandbox.py`: `python3` is 3.9, `dnf install python3.X` adds another).

- A new instance is `pending` for the boot delay, then its user data runs, once, as a root shell script, and the
  instance is `running`. As in EC2, the instance stays `running` when the script ends, whatever its exit status
  (cloud-init's words go to its log); it ends only when it is terminated, or when it shuts itself down
  (`shutdown -h now`, `poweroff`, `halt`: the fake cloud's shims), and then by its
  `InstanceInitiatedShutdownBehavior`: `terminate` (terminated) or `stop` (stopped; AWS's default). A reboot
  restarts nothing (user data runs at the first boot only).
- An instance terminated or stopped: its process group gets SIGTERM, then SIGKILL after a grace period; it is
  `shutting-down` (`stopping`) until the group has exited, as in EC2.
- A spot instance (launched with `InstanceMarketOptions`) has the spot request EC2 makes (`ec2_spot`); an
  interrupted one runs on through its notice (`spot_notice_seconds`), then EC2 terminates it as above.
- `PrivateIpAddress` and `PublicIpAddress` are the unit's address.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from scaler_rehearsal.fake_cloud.launched import LaunchedProcess
from scaler_rehearsal.fake_cloud.runners import (
    FakeCloudRunnerSettings,
    KnownResource,
    allocate_address,
    forget_unit,
    start_unit,
)

#: What an instance's own shutdown leaves in its StateReason (EC2's words).
INSTANCE_SHUTDOWN = (
    "Client.InstanceInitiatedShutdown: Instance initiated shutdown",
    "Client.InstanceInitiatedShutdown",
)
_GONE = ("shutting-down", "terminated", "stopping", "stopped")


@dataclass(frozen=True)
class SpotNotice:
    """An interrupted spot instance's notice: when it ends (monotonic) and the wall-clock time then."""

    ends_at: float
    ends_at_wall: float


class Ec2Runner:
    def __init__(self, settings: FakeCloudRunnerSettings) -> None:
        self.settings = settings
        self.launches: dict[str, KnownResource] = {}  #: instance id -> launch
        self.notices: dict[str, SpotNotice] = {}  #: interrupted spot instance id -> its notice

    def step(self, now: float) -> None:
        from moto.ec2.models import ec2_backends

        for _account, regions in list(ec2_backends.items()):
            for region, backend in list(regions.items()):
                for instance in list(backend.all_instances()):
                    self._follow(now, region, backend, instance)

    def _follow(self, now: float, region: str, backend: Any, instance: Any) -> None:
        from moto.ec2.models.instances import InstanceState

        notice = self.notices.get(instance.id)
        if notice is not None and now >= notice.ends_at and instance._state.name in ("pending", "running"):
            from scaler_rehearsal.fake_cloud import ec2_spot

            ec2_spot.terminated_by_service(instance, notice.ends_at_wall)
        if instance._state.name in _GONE:
            self._stopping(now, instance)
            return
        launch = self.launches.get(instance.id) or self._announce(now, instance)
        if not launch.booted:
            if now - launch.seen_at >= self.settings.boot_seconds:
                launch.process = self._start(region, instance, launch)
                launch.booted = True
                instance._state = InstanceState("running", 16)
            else:
                instance._state = InstanceState("pending", 0)
            return
        action = self.settings.sandbox.shutdown_requested(launch.name)
        if action is not None:
            self._shut_down(now, backend, instance, launch, action)
            return
        if launch.process is not None and not launch.boot_ended and launch.process.exit_code() is not None:
            launch.boot_ended = True
            _note_end_of_user_data(launch.process)

    def _shut_down(self, now: float, backend: Any, instance: Any, launch: KnownResource, action: str) -> None:
        """The instance ran its own shutdown: a reboot ends its processes (nothing restarts); a power-off stops or
        terminates it by its InstanceInitiatedShutdownBehavior."""
        from moto.ec2.models.instances import StateReason

        (self.settings.sandbox.unit_folder(launch.name) / ".fake-cloud" / "shutdown").unlink(missing_ok=True)
        if action == "reboot":
            if launch.process is not None:
                launch.process.kill()
            return
        if getattr(instance, "instance_initiated_shutdown_behavior", "stop") == "terminate":
            backend.terminate_instances([instance.id])
        else:
            backend.stop_instances([instance.id])
        instance.state_reason = StateReason(*INSTANCE_SHUTDOWN)
        instance._reason = INSTANCE_SHUTDOWN[0]
        self._stopping(now, instance)

    def _stopping(self, now: float, instance: Any) -> None:
        """An instance being terminated (stopped) is shutting-down (stopping) until its processes have exited."""
        from moto.ec2.models.instances import InstanceState

        launch = self.launches.get(instance.id)
        terminating = instance._state.name in ("shutting-down", "terminated")
        if launch is not None and launch.process is not None and not launch.forgotten and launch.process.group_alive():
            launch.process.stop(now)
            launch.process.step(now)
            instance._state = InstanceState("shutting-down", 32) if terminating else InstanceState("stopping", 64)
            return
        if terminating and instance._state.name != "terminated":
            instance._state = InstanceState("terminated", 48)
        elif not terminating and instance._state.name != "stopped":
            instance._state = InstanceState("stopped", 80)
        if launch is not None and terminating:
            forget_unit(self.settings, launch)

    def launched_by_api(self, now: float, wall_time: float, instances: list[Any], spot: bool = False) -> None:
        """Right after `run_instances`: the instances are booting; spot ones (`InstanceMarketOptions`) have the spot
        request EC2 makes."""
        from moto.ec2.models.instances import InstanceState

        from scaler_rehearsal.fake_cloud import ec2_spot

        for instance in instances:
            self._announce(now, instance)
            instance._state = InstanceState("pending", 0)
            if spot:
                ec2_spot.open_request(instance, wall_time)

    def terminated_by_api(self, now: float, wall_time: float, instance_ids: list[str]) -> None:
        """Right after `terminate_instances` (which moto answers with terminated at once)."""
        from scaler_rehearsal.fake_cloud import ec2_spot

        for instance in _instances():
            if instance.id in instance_ids:
                ec2_spot.terminated_by_user(instance, wall_time)
                self._stopping(now, instance)

    def interrupt(self, now: float, wall_time: float, instance_id: str) -> str | None:
        """An EC2 spot interruption: the instance's spot request gives the two-minute warning now, and EC2
        terminates the instance when the notice (`spot_notice_seconds`) ends. What was done; None when there is no
        such instance; `FaultRefused` naming why when it cannot be interrupted."""
        from scaler_rehearsal.fake_cloud import ec2_spot
        from scaler_rehearsal.fake_cloud.faults import FaultRefused

        instance = next((instance for instance in _instances() if instance.id == instance_id), None)
        if instance is None:
            return None
        request = ec2_spot.request_of(instance)
        if request is None and instance.lifecycle == "spot":
            raise FaultRefused(f"EC2 instance {instance_id} was launched by a spot request or fleet: only the spot "
                               "instances run_instances launches are interrupted here")  # fmt: skip
        if request is None:
            raise FaultRefused(f"EC2 instance {instance_id} is not a spot instance (launched without "
                               "InstanceMarketOptions MarketType spot): only spot capacity is taken back")  # fmt: skip
        if instance._state.name not in ("pending", "running"):
            raise FaultRefused(
                f"EC2 instance {instance_id} is {instance._state.name}: only a running instance is interrupted"
            )
        if instance_id in self.notices:
            raise FaultRefused(f"EC2 instance {instance_id} has had its interruption notice already")
        seconds = self.settings.spot_notice_seconds
        self.notices[instance_id] = SpotNotice(now + seconds, wall_time + seconds)
        ec2_spot.warn(request, wall_time)
        return (f"EC2 instance {instance_id}: spot interruption notice (spot request {request.id}: "
                f"{ec2_spot.INTERRUPTED}); EC2 terminates it in {seconds:g} s")  # fmt: skip

    def _announce(self, now: float, instance: Any) -> KnownResource:
        launch = self.launches.get(instance.id)
        if launch is None:
            launch = self.launches[instance.id] = KnownResource(now, name=f"ec2-{instance.id}")
            address = allocate_address(self.settings, launch)
            instance.nics[0].private_ip_address = address
            instance.nics[0].public_ip = address
        return launch

    def _start(self, region: str, instance: Any, launch: KnownResource) -> LaunchedProcess:
        script = _user_data(instance.user_data) or "#!/bin/sh\necho 'the instance has no user data'\n"
        unit = self.settings.sandbox.instance(launch.name, script, self.settings.endpoint_url, region)
        unit.environment["EC2_INSTANCE_ID"] = instance.id
        return start_unit(self.settings, launch, unit, self.settings.log_directory / "ec2" / f"{instance.id}.log")

    def close(self) -> None:
        for launch in self.launches.values():
            if launch.process is not None:
                launch.process.kill()
            forget_unit(self.settings, launch)


def _note_end_of_user_data(process: LaunchedProcess) -> None:
    """cloud-init's words when the user data script has ended (the instance runs on)."""
    code = process.exit_code()
    with open(process.log_path, "a") as log:
        if code:
            log.write(f"cloud-init: Failed running /var/lib/cloud/instance/scripts/part-001 [{code}]\n"
                      "cloud-init: Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)\n"
                      "cloud-init: the instance runs on, without what its user data did not start\n")  # fmt: skip
        else:
            log.write("cloud-init: the user data script finished (exit status 0); the instance runs on\n")


def _instances() -> list[Any]:
    """Every EC2 instance moto holds, in every account and region."""
    from moto.ec2.models import ec2_backends

    return [instance for regions in list(ec2_backends.values()) for backend in list(regions.values())
            for instance in list(backend.all_instances())]  # fmt: skip


def _user_data(raw: Any) -> str:
    if not raw:
        return ""
    value = raw[0] if isinstance(raw, list) else raw
    text = str(value)
    try:
        return base64.b64decode(text, validate=True).decode()
    except ValueError:
        return text
