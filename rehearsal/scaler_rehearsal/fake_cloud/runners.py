"""What the fake cloud's runners share: their settings, the record of a launched resource, and how a unit's
command becomes a process (in its network namespace when the cloud isolates its units).

Each step (every `STEP_SECONDS`), the runners match every ECS task (`ecs_tasks.py`) and EC2 instance
(`ec2_instances.py`) moto holds with a local process group; moto's Batch starts its jobs' containers itself
(`batch.py`). A unit starts from nothing (`sandbox.py`): its image's or AMI's Python, the packages its boot
installs, its own folder, and none of the laptop's environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scaler_rehearsal.fake_cloud.images import ImageCatalogue
from scaler_rehearsal.fake_cloud.launched import LaunchedProcess
from scaler_rehearsal.fake_cloud.sandbox import Launch as UnitLaunch

if TYPE_CHECKING:
    from scaler_rehearsal.fake_cloud.network import UnitNetwork
    from scaler_rehearsal.fake_cloud.sandbox import Sandbox

#: How long an interrupted EC2 spot instance runs on before EC2 terminates it, as in AWS.
SPOT_NOTICE_SECONDS = 120.0


@dataclass
class KnownResource:
    """A resource the fake cloud knows: seen at `seen_at`, its unit's name and address, its process once booted."""

    seen_at: float
    name: str = ""
    address: str | None = None
    process: LaunchedProcess | None = None
    #: the boot ran (user data runs at an instance's first boot only)
    booted: bool = False
    #: its boot command (an instance's user data) has ended, and its log says so
    boot_ended: bool = False
    #: the unit's folder and network are gone with it
    forgotten: bool = False
    #: (account, region, group, stream) of the unit's CloudWatch log, and how much of its log was sent there
    log_destination: tuple[str, str, str, str] | None = None
    log_offset: int = 0


@dataclass
class FakeCloudRunnerSettings:
    endpoint_url: str
    sandbox: Sandbox
    boot_seconds: float = 0.0
    log_directory: Path = Path("fake-cloud-logs")
    spot_notice_seconds: float = SPOT_NOTICE_SECONDS
    images: ImageCatalogue = field(default_factory=ImageCatalogue)
    network: UnitNetwork | None = None
    #: how ECS task containers run: None (local process groups) or a container engine (`containers.py`)
    container_engine: str | None = None


def start_unit(
    settings: FakeCloudRunnerSettings, launch: KnownResource, unit: UnitLaunch, log: Path
) -> LaunchedProcess:
    """The unit's process group, in the unit's network namespace when the cloud isolates its units."""
    argv = unit.argv
    if settings.network is not None and launch.address is not None:
        argv = settings.network.enter(launch.name, launch.address) + argv
    return LaunchedProcess(argv, unit.environment, log, cwd=unit.cwd)


def allocate_address(settings: FakeCloudRunnerSettings, launch: KnownResource) -> str:
    """The unit's address (its ENI's private and public IP): a TEST-NET address of the cloud's VPC, or the
    loopback address when units share the laptop's network."""
    if settings.network is None:
        return "127.0.0.1"
    if launch.address is None:
        launch.address = settings.network.allocate(launch.name)
    return launch.address


def forget_unit(settings: FakeCloudRunnerSettings, launch: KnownResource) -> None:
    """A unit whose processes are all gone: its folder and its network namespace go too."""
    if launch.forgotten:
        return
    launch.forgotten = True
    settings.sandbox.forget(launch.name)
    if settings.network is not None:
        settings.network.release(launch.name)
