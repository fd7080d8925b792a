"""A unit's boot report is logged once, however its readers interleave: the cloud hub's start looks at its own unit
between listings of all of them, and a hub that failed in an earlier start of the stack must not be logged again as
an error at every poll. The hub's start reads its unit's report at each of its polls, not every REPORT_PERIOD_SECONDS
as a listing does (checked off: the report written after its first look was read 304,237 looks later, its polls
spinning without a pause for the period)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

import pytest

pytest.importorskip("botocore", reason="boto3 comes with the aws extra (make test installs it)")

from scaler.cluster import cloud_hub
from scaler.worker_manager.aws.bucket import ManagerBucket
from scaler.worker_manager.aws.shipping import REPORT_PERIOD_SECONDS, Shipment
from scaler.worker_manager.ship.environment import UnitEnvironment


class FakeBucket:
    """The reports of the units, as their boot program wrote them."""

    def __init__(self, reports: dict[str, dict[str, Any]]) -> None:
        self.reports = reports

    async def get_json(self, key: str) -> Any:
        return self.reports.get(key)


def test_a_look_at_one_unit_does_not_make_a_failed_unit_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    bucket = FakeBucket({
        "units/ecs-hub/old/report.json": {"state": "failed", "problems": ["could not install scaler-compute"]},
        "units/ecs-hub/new/report.json": {"state": "booting"},
    })  # fmt: skip
    shipment = Shipment(cast(ManagerBucket, bucket), cast(UnitEnvironment, None), "ecs-hub", 60.0)

    async def hub_start() -> None:
        for second in range(5):  # the hub's wait: the listing (every unit), then its own unit's report
            await shipment.reports(["new"], float(second), gone=["old"])
            await shipment.reports(["new"], float(second), prune=False)

    with caplog.at_level(logging.INFO, logger="scaler.worker_manager.aws.shipping"):
        asyncio.run(hub_start())
    failures = [record for record in caplog.records if "unit old" in record.getMessage()]
    assert len(failures) == 1 and failures[0].levelno == logging.ERROR


def test_a_unit_that_says_started_then_running_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """issue 60: the hub's boot program reports `started`, then the hub itself `running`, with the same boot and
    install times: the launcher printed "unit X: started, booted in 2.4 s, install 0.0 s" and the same line again
    with `running`. `started` says nothing the `running` after it does not, unless something went wrong."""
    boot = {"boot_seconds": 2.4, "install_seconds": 0.0}
    bucket = FakeBucket({"units/ecs-hub/hub/report.json": {"state": "started", **boot}})
    shipment = Shipment(cast(ManagerBucket, bucket), cast(UnitEnvironment, None), "ecs-hub", 60.0)
    with caplog.at_level(logging.INFO, logger="scaler.worker_manager.aws.shipping"):
        asyncio.run(shipment.reports(["hub"], 100.0))
        bucket.reports["units/ecs-hub/hub/report.json"] = {"state": "running", **boot}
        asyncio.run(shipment.reports(["hub"], 200.0))
    assert [record.getMessage() for record in caplog.records] == ["unit hub: running, booted in 2.4 s, install 0.0 s"]


def test_a_look_at_its_own_pace_reads_the_report_again_at_once() -> None:
    bucket = FakeBucket({})
    shipment = Shipment(cast(ManagerBucket, bucket), cast(UnitEnvironment, None), "ecs-hub", 60.0)
    assert asyncio.run(shipment.reports(["hub"], 100.0, prune=False, period_seconds=0.0)) == {}
    bucket.reports["units/ecs-hub/hub/report.json"] = {"state": "running", "hub": {"address": "10.0.0.5"}}
    # a listing's look, within its period, does not read it again; the hub's wait, a second on, does
    assert asyncio.run(shipment.reports(["hub"], 100.0 + REPORT_PERIOD_SECONDS / 2, prune=False)) == {}
    found = asyncio.run(shipment.reports(["hub"], 101.0 + REPORT_PERIOD_SECONDS / 2, prune=False, period_seconds=0.0))
    assert found["hub"]["hub"] == {"address": "10.0.0.5"}


@dataclass
class HubUnit:
    unit_id: str = "hub"
    is_alive: bool = True
    detail: str = ""


class BootingHub:
    """A cloud backend whose hub unit writes its report right after the start's first look at it."""

    def __init__(self) -> None:
        self.bucket = FakeBucket({})
        self.shipment = Shipment(cast(ManagerBucket, self.bucket), cast(UnitEnvironment, None), "ecs-hub", 60.0)
        self.looks = 0

    async def list_units(self) -> list[HubUnit]:
        self.looks += 1
        if self.looks == 2:
            self.bucket.reports["units/ecs-hub/hub/report.json"] = {"state": "running", "hub": {
                "address": "1.2.3.4", "scheduler_port": 8516, "storage_port": 8517, "monitor_port": 8518}}  # fmt: skip
        return [HubUnit()]


def test_the_hubs_start_reads_its_report_at_its_next_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cloud_hub, "POLL_SECONDS", 0.0)
    backend = BootingHub()
    hub = cloud_hub.CloudHub.__new__(cloud_hub.CloudHub)
    hub._backend, hub._boot_seconds = backend, 60.0
    addresses = asyncio.run(hub._wait("hub", lambda: False))
    assert (addresses.laptop, addresses.scheduler_port) == ("1.2.3.4", 8516)
    assert backend.looks == 2, "the report written after the first look is read at the second"
