"""EC2 spot instances on the fake cloud, as the EC2 user guide describes them ("Spot request status", "Spot
Instance interruption notices"). moto marks an instance launched with `InstanceMarketOptions` as `spot` and
makes no spot request for it; here it gets the one-time request EC2 makes, and that request's status follows
the instance:

- launched: the request is `active`, status `fulfilled`; the instance's `SpotInstanceRequestId` names it, and
  `describe_spot_instance_requests` lists it (by its id, or filtered by `instance-id`);
- interrupted (EC2 takes the capacity back from an instance set to terminate): at the two-minute warning the
  status turns `instance-terminated-no-capacity` (in this case EC2 skips `marked-for-termination`, the guide
  says) and the request `closed`, updated then, while the instance goes on running; at the end of the notice the
  service terminates the instance: `StateTransitionReason` "Service initiated (...)", `StateReason`
  `Server.SpotInstanceTermination`;
- terminated by its user (or its own shutdown) before any warning: `instance-terminated-by-user`, `closed`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from moto.ec2.models.spot_requests import LaunchSpecification, SpotInstanceRequest
from moto.ec2.utils import random_spot_request_id

#: The status EC2 gives a one-time request whose instance it interrupts for capacity, and its message.
INTERRUPTED = "instance-terminated-no-capacity"
INTERRUPTED_MESSAGE = "Your instance was terminated due to standard capacity management processes."
#: What a terminated spot instance says of the service's termination.
SPOT_TERMINATION = "Server.SpotInstanceTermination"
SPOT_TERMINATION_MESSAGE = "Server.SpotInstanceTermination: Spot instance termination"


class InstanceSpotRequest(SpotInstanceRequest):
    """The one-time spot request of an instance `run_instances` launched (moto's own requests launch theirs)."""

    def __init__(self, instance: Any, wall_time: float) -> None:
        self.ec2_backend = instance.ec2_backend
        self.id = random_spot_request_id()
        self.instance = instance
        self.launch_specification = LaunchSpecification(
            kernel_id=None, ramdisk_id=None, image_id=instance.image_id, key_name=instance.key_name,
            instance_type=instance.instance_type, placement=instance.placement.zone, monitored=False,
            subnet_id=instance.subnet_id,
        )  # fmt: skip
        self.price = ""
        self.type = "one-time"
        self.valid_from = self.valid_until = None
        self.launch_group = self.availability_zone_group = None
        self.instance_interruption_behaviour = "terminate"
        self.user_data = None
        self.spot_fleet_id = None
        self.launch_spec = None
        self.all_tags: dict[str, dict[str, str]] = {}
        self.created_at = wall_time
        self.set_status("active", "fulfilled", "Your spot request is fulfilled.", wall_time)

    def set_status(self, state: str, code: str, message: str, wall_time: float) -> None:
        self.state = state
        self._status_code = code
        self.status_message = message
        self.updated_at = wall_time

    @property
    def status_code(self) -> str:  # the `status-code` filter
        return self._status_code

    @property
    def status(self) -> dict[str, Any]:
        return {"Code": self._status_code, "Message": self.status_message, "UpdateTime": _utc(self.updated_at)}

    @property
    def create_time(self) -> str:
        return _utc(self.created_at).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def open_request(instance: Any, wall_time: float) -> InstanceSpotRequest:
    """The request EC2 makes for a spot instance `run_instances` launched; the instance names it."""
    request = InstanceSpotRequest(instance, wall_time)
    instance.ec2_backend.spot_instance_requests[request.id] = request
    instance.spot_instance_request_id = request.id
    return request


def request_of(instance: Any) -> InstanceSpotRequest | None:
    request = instance.ec2_backend.spot_instance_requests.get(getattr(instance, "spot_instance_request_id", None))
    return request if isinstance(request, InstanceSpotRequest) else None


def warn(request: InstanceSpotRequest, wall_time: float) -> None:
    """The two-minute warning: the request says the instance is being taken back."""
    request.set_status("closed", INTERRUPTED, INTERRUPTED_MESSAGE, wall_time)


def terminated_by_user(instance: Any, wall_time: float) -> None:
    request = request_of(instance)
    if request is not None and request.status_code != INTERRUPTED:
        request.set_status("closed", "instance-terminated-by-user", "Spot Instance terminated due to user-initiated "
                           "termination.", wall_time)  # fmt: skip


def terminated_by_service(instance: Any, wall_time: float) -> None:
    """The end of the notice: the instance is terminated by EC2 (its processes are stopped by the runner)."""
    from moto.ec2.models.instances import StateReason

    instance.terminate()  # moto's own bookkeeping; the reasons below are the service's, not a user's
    instance._reason = f"Service initiated ({_utc(wall_time).strftime('%Y-%m-%d %H:%M:%S')} GMT)"
    instance.state_reason = StateReason(SPOT_TERMINATION_MESSAGE, SPOT_TERMINATION)


def _utc(wall_time: float) -> datetime:
    return datetime.fromtimestamp(wall_time, timezone.utc)
